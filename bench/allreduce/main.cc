// athanor-bench-allreduce: all-reduce time, algbw and busbw per size, in
// nccl-tests' columns, beside Open MPI's MPI_Allreduce on the same buffers
// (--baseline mpi) and this machine's memcpy bandwidth, all from one run.
//
//   mpirun -np 2 athanor-bench-allreduce --backend ucx --min-bytes 8 --max-bytes 256M
//   athanor-bench-allreduce --nproc 2 ...     (re-runs itself under mpirun when
//                                              MPI is needed, else forks N ranks)
//   athanor-bench-allreduce --hosts 2+2 ...   (root: ranks on namespace hosts;
//                                              flat ring, hierarchical and gloo,
//                                              see cross_host.h)
//
// Times are medians over --batches batches of --iters calls (after --warmup),
// the slowest rank's median. GB = 1e9; busbw = algbw * 2(n-1)/n.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/allreduce/bench_util.h"
#include "bench/allreduce/cross_host.h"
#include "collectives/factory.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/ucx/ucx_tuning_env.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/options.h"
#include "common/rank_env.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace athanor {
namespace {

struct BenchOptions {
  std::string backend = "ucx", dtype = "f32", op = "sum", baseline = "mpi", json;
  size_t min_bytes = 8, max_bytes = 256u << 20;
  int iters = 20, batches = 5, warmup = 5, nproc = 1;
  bool check = false;
};

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "athanor-bench-allreduce";
}

// Starts the ranks: under mpirun when MPI is needed, else N forked copies with the env contract.
int Launch(const BenchOptions& o, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (o.baseline == "mpi" || o.backend == "mpi") {
    std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(o.nproc), "--oversubscribe",
                                    "--bind-to", "none"};
    if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    cmd.push_back(SelfPath());
    cmd.insert(cmd.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& s : cmd) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    execvp("mpirun", cargv.data());
    perror("execvp mpirun");
    return 1;
  }
  auto port = PickFreePort();
  if (!port.ok()) return 1;
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < o.nproc; ++r) {
    RankEnv env;
    env.rank = r, env.world_size = o.nproc, env.local_rank = r, env.local_world_size = o.nproc;
    env.master_addr = "127.0.0.1", env.master_port = *port;
    SubprocessOptions so;
    so.argv = {SelfPath()};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    so.env = env.ToEnvironment();
    so.new_process_group = false;
    auto p = Subprocess::Start(so);
    if (!p.ok()) {
      fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 1;
    }
    ranks.push_back(*std::move(p));
  }
  int rc = 0;
  for (auto& p : ranks) rc = std::max(rc, p->Wait().exit_code);
  return rc;
}

class Bench {
 public:
  Bench(const BenchOptions& o, Communicator* comm) : o_(o), comm_(comm) {}

  // Median seconds per call of fn, the slowest rank's. The first size also
  // warms up the transports (wire-up, page faults): 20x the warm-up calls.
  double Time(const std::function<absl::Status()>& fn, const std::function<void()>& barrier,
              bool first) {
    for (int i = 0; i < o_.warmup * (first ? 20 : 1); ++i) Must(fn());
    std::vector<double> per_call;
    for (int b = 0; b < o_.batches; ++b) {
      barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o_.iters; ++i) Must(fn());
      per_call.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                         o_.iters);
    }
    int64_t ns = static_cast<int64_t>(Median(per_call) * 1e9);
    Must(comm_->AllReduce(&ns, &ns, 1, DataType::kI64, ReduceOp::kMax));
    return ns / 1e9;
  }

  static void Must(const absl::Status& s) {
    if (!s.ok()) {
      fprintf(stderr, "all-reduce failed: %s\n", s.ToString().c_str());
      exit(1);
    }
  }

 private:
  const BenchOptions& o_;
  Communicator* comm_;
};

MPI_Datatype MpiBuiltin(DataType t) {
  switch (t) {
    case DataType::kF32: return MPI_FLOAT;
    case DataType::kI32: return MPI_INT32_T;
    case DataType::kI64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op MpiBuiltin(ReduceOp op) {
  return op == ReduceOp::kMax ? MPI_MAX : op == ReduceOp::kMin ? MPI_MIN : MPI_SUM;
}

int RunRank(const BenchOptions& o) {
  const bool under_mpi = StartedByMpirun();
  CommunicatorOptions co;
  co.backend = o.backend;
  if (under_mpi) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &co.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &co.world_size);
    if (co.rank == 0) co.master_port = PickFreePort().value_or(29500);
    MPI_Bcast(&co.master_port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  auto env = ParseRankEnv(ProcessEnv());
  if (!env.ok()) {
    fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 1;
  }
  if (!under_mpi) {
    co.rank = env->rank, co.world_size = env->world_size;
    co.master_addr = env->master_addr.empty() ? "127.0.0.1" : env->master_addr;
    co.master_port = env->master_port;
  }
  co.local_rank = env->local_rank;
  auto tuning = UcxTuningFromEnv(ProcessEnv());
  if (!tuning.ok()) {
    fprintf(stderr, "%s\n", tuning.status().ToString().c_str());
    return 2;
  }
  co.ucx = *tuning;
  auto rendezvous = ParseRendezvousEnv(ProcessEnv());
  if (!rendezvous.ok()) {
    fprintf(stderr, "%s\n", rendezvous.status().ToString().c_str());
    return 2;
  }
  co.rendezvous_secret = rendezvous->secret;
  co.rendezvous_listen_fd = rendezvous->listen_fd;
  SetLogTags(absl::StrCat("rank=", co.rank));
  DataType type;
  ReduceOp op;
  if (!ParseDataType(o.dtype, &type) || !ParseReduceOp(o.op, &op)) {
    fprintf(stderr, "bad --dtype or --op\n");
    return 2;
  }
  const bool baseline = o.baseline == "mpi" && under_mpi;
  double memcpy_gbps = 0;
  int rc = 0;
  {
    auto comm = CreateCommunicator(co);
    if (!comm.ok()) {
      fprintf(stderr, "rank %d: %s\n", co.rank, comm.status().ToString().c_str());
      return 1;
    }
    std::unique_ptr<Communicator> mpi_comm;  // f16/bf16 baseline: the mpi backend's user op
    if (baseline && MpiBuiltin(type) == MPI_DATATYPE_NULL) {
      CommunicatorOptions mo = co;
      mo.backend = "mpi";
      mpi_comm = CreateCommunicator(mo).value_or(nullptr);
    }
    Communicator* c = comm->get();
    if (co.rank == 0) memcpy_gbps = MeasureMemcpyGBps(64u << 20);
    Bench::Must(c->Barrier());
    const int n = co.world_size;
    const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    const size_t esz = DataTypeSize(type);
    if (co.rank == 0) {
      printf("# athanor-bench-allreduce: backend %s, %d ranks, %s %s, memcpy %.2f GB/s "
             "(64 MiB, same run), medians of %d x %d calls\n",
             o.backend.c_str(), n, o.dtype.c_str(), o.op.c_str(), memcpy_gbps, o.batches, o.iters);
      printf("%12s %12s %5s %5s %11s %8s %8s %7s%s\n", "size(B)", "count", "type", "redop",
             "time(us)", "algbw", "busbw", "#wrong",
             baseline ? "    mpi(us) mpi_busbw  ratio" : "");
    }
    nlohmann::json rows = nlohmann::json::array();
    for (size_t bytes = std::max(o.min_bytes, esz); bytes <= o.max_bytes; bytes *= 2) {
      const size_t count = bytes / esz;
      BenchBuffers buf(count * esz, o.backend == "nccl");
      buf.Fill(type, count, co.rank);
      Bench bench(o, c);
      const bool first = bytes == std::max(o.min_bytes, esz);
      double t = bench.Time([&] { return c->AllReduce(buf.send(), buf.recv(), count, type, op); },
                            [&] { Bench::Must(c->Barrier()); }, first);
      int64_t wrong = o.check ? buf.CountWrong(type, op, count, n) : 0;
      Bench::Must(c->AllReduce(&wrong, &wrong, 1, DataType::kI64, ReduceOp::kSum));
      double mpi_t = 0;
      if (baseline) {
        buf.Fill(type, count, co.rank);
        if (mpi_comm == nullptr) {
          mpi_t = bench.Time([&] {
            int e = MPI_Allreduce(buf.send(), buf.recv(), static_cast<int>(count), MpiBuiltin(type),
                                  MpiBuiltin(op), MPI_COMM_WORLD);
            return e == MPI_SUCCESS ? absl::OkStatus() : absl::InternalError("MPI_Allreduce");
          }, [] { MPI_Barrier(MPI_COMM_WORLD); }, first);
        } else {
          mpi_t = bench.Time([&] {
            return mpi_comm->AllReduce(buf.send(), buf.recv(), count, type, op);
          }, [] { MPI_Barrier(MPI_COMM_WORLD); }, first);
        }
      }
      const double algbw = count * esz / t / 1e9, busbw = algbw * bus;
      const double mpi_busbw = mpi_t > 0 ? count * esz / mpi_t / 1e9 * bus : 0;
      if (co.rank == 0) {
        printf("%12zu %12zu %5s %5s %11.2f %8.3f %8.3f %7lld", count * esz, count, o.dtype.c_str(),
               o.op.c_str(), t * 1e6, algbw, busbw, static_cast<long long>(wrong));
        if (baseline) printf(" %11.2f %9.3f %6.2f", mpi_t * 1e6, mpi_busbw, mpi_t / t);
        printf("\n");
        fflush(stdout);
        rows.push_back({{"size_bytes", count * esz}, {"count", count}, {"type", o.dtype},
                        {"op", o.op}, {"backend", o.backend}, {"world_size", n},
                        {"time_us", t * 1e6}, {"algbw_gbps", algbw}, {"busbw_gbps", busbw},
                        {"wrong", wrong}, {"memcpy_gbps", memcpy_gbps}});
        if (baseline) {
          rows.back()["mpi_time_us"] = mpi_t * 1e6;
          rows.back()["mpi_busbw_gbps"] = mpi_busbw;
          rows.back()["speedup_vs_mpi"] = mpi_t / t;
        }
      }
      if (wrong != 0) rc = 3;
    }
    if (co.rank == 0 && !o.json.empty()) {
      std::ofstream(o.json) << rows.dump(1) << "\n";
    }
    mpi_comm.reset();
  }
  if (under_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  return rc;
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) {
  using namespace athanor;
  BenchOptions o;
  std::string min_bytes = "8", max_bytes = "256M";
  CrossHostOptions cross;
  std::string log_level = "info";
  po::options_description desc("athanor-bench-allreduce");
  desc.add_options()
      ("backend", po::value(&o.backend)->default_value(o.backend), "ucx | mpi | nccl")
      ("dtype", po::value(&o.dtype)->default_value(o.dtype), "f32 | f16 | bf16 | i32 | i64")
      ("op", po::value(&o.op)->default_value(o.op), "sum | avg | max | min")
      ("min-bytes", po::value(&min_bytes)->default_value(min_bytes), "smallest size (K/M/G suffixes)")
      ("max-bytes", po::value(&max_bytes)->default_value(max_bytes), "largest size; sizes double")
      ("iters", po::value(&o.iters)->default_value(o.iters), "calls per timed batch")
      ("batches", po::value(&o.batches)->default_value(o.batches), "timed batches; the median is reported")
      ("warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed calls per size")
      ("check", po::bool_switch(&o.check), "verify every element (counted in #wrong)")
      ("json", po::value(&o.json), "write one JSON object per size to this file")
      ("baseline", po::value(&o.baseline)->default_value(o.baseline),
       "mpi: also time MPI_Allreduce on the same buffers (needs mpirun); none")
      ("log-level", po::value(&log_level)->default_value(log_level),
       "debug also logs which algorithm each size class runs")
      ("hosts", po::value(&cross.layout),
       "ranks per namespace host, e.g. 2+2, 3+1, 1+1+2 (root): flat ring, hierarchical and gloo "
       "side by side")
      ("runs", po::value(&cross.runs)->default_value(cross.runs),
       "with --hosts: runs of each algorithm; medians are reported")
      ("mtu", po::value(&cross.mtu)->default_value(cross.mtu),
       "with --hosts: MTU of the namespace hosts' links and bridge (576-65535)")
      ("nproc", po::value(&o.nproc)->default_value(o.nproc),
       "start this many ranks (under mpirun when MPI is needed) unless already a rank");
  ParsedCommandLine cl;
  absl::Status s = ParseOptions(argc, argv, desc, "athanor-bench-allreduce [flags]", &cl);
  if (!s.ok()) {
    fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  if (cl.help) return 0;
  auto lo = ParseByteSize(min_bytes), hi = ParseByteSize(max_bytes);
  if (!lo.ok() || !hi.ok()) {
    fprintf(stderr, "bad --min-bytes / --max-bytes\n");
    return 2;
  }
  o.min_bytes = *lo, o.max_bytes = *hi;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level)) {
    fprintf(stderr, "bad --log-level '%s'\n", log_level.c_str());
    return 2;
  }
  SetMinLogLevel(level);
  bool is_rank = StartedByMpirun() || getenv("RANK") != nullptr;
  if (!is_rank && !cross.layout.empty()) {
    if (cross.runs < 1) {
      fprintf(stderr, "--runs must be at least 1\n");
      return 2;
    }
    if (cross.mtu < 576 || cross.mtu > 65535) {
      fprintf(stderr, "--mtu must be between 576 and 65535, not %d\n", cross.mtu);
      return 2;
    }
    cross.min_bytes = o.min_bytes, cross.max_bytes = o.max_bytes;
    cross.iters = o.iters, cross.batches = o.batches, cross.warmup = o.warmup;
    cross.check = o.check, cross.json = o.json;
    return RunCrossHost(cross);
  }
  if (!is_rank) return Launch(o, argc, argv);
  return RunRank(o);
}
