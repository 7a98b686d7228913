// athanor-bench-checkpoint: what a checkpoint costs, against baselines
// measured in the same run on the same machine.
//
//   stall    Save() (copy into the staging buffer)  vs  memcpy of the same bytes
//   stall    the same through the node checkpoint service (copy into its
//            shared-memory staging area + hand-off)  vs  memcpy, same run
//   file     Save's return..commit to file://DIR            vs  write+fsync of the same bytes
//   s3       Save's return..commit to s3rver        vs  `s3cmd put` of the same bytes
//   restore  Restore() from each store               vs  read() / `s3cmd get`
//   phases   the service stall's copy into the staging area alone, and
//            read() + CRC32C per 4 MiB piece, each vs its baseline
//
// Ranks are threads (--ranks, default 2) with an in-process CommitBarrier;
// every measurement runs all ranks at once. Medians over --reps after one
// warm-up. GB = 1e9 bytes. Restored bytes are compared with what was saved.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/file/file_object_store.h"
#include "checkpoint/restore.h"
#include "checkpoint/s3/s3_object_store.h"
#include "checkpoint/service/checkpoint_service.h"
#include "checkpoint/service/rank_registry.h"
#include "checkpoint/service/service_checkpointer.h"
#include "common/crc32c.h"
#include "common/options.h"
#include "testing/s3/s3rver_fixture.h"

namespace athanor {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Config {
  uint64_t bytes = 1ull << 30;
  int ranks = 2;
  int reps = 3;
  std::string dir;
  bool s3 = true;
  bool json = false;
};

// Runs fn(rank) on all ranks at once; returns the slowest rank's seconds.
double Parallel(int ranks, const std::function<double(int)>& fn) {
  std::vector<double> t(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { t[r] = fn(r); });
  for (auto& th : threads) th.join();
  return *std::max_element(t.begin(), t.end());
}

struct RankData {
  std::vector<char> state;    // what the trainer holds
  std::vector<char> scratch;  // memcpy baseline target / restore target
  TrainingState ts;
};

void MakeRankData(RankData* d, uint64_t bytes, int rank) {
  d->state.resize(bytes);
  d->scratch.resize(bytes);
  for (uint64_t i = 0; i < bytes; i += 4096) d->state[i] = static_cast<char>(i / 4096 + rank);
  std::memset(d->scratch.data(), 1, bytes);  // fault the pages in
  const int kTensors = 4;
  uint64_t each = bytes / kTensors / 4 * 4;
  for (int t = 0; t < kTensors; ++t) {
    uint64_t n = t == kTensors - 1 ? bytes - each * (kTensors - 1) : each;
    d->ts.tensors.push_back({absl::StrCat("layer", t, ".weight"), TensorDType::kF32,
                             {static_cast<int64_t>(n / 4)}, d->state.data() + t * each, n, {}});
  }
  d->ts.metadata = {{"rng_state", "bench"}};
}

struct Row {
  std::string what;
  double ours_s = 0;
  double base_s = 0;
  std::string base_name;
};

class Bench {
 public:
  explicit Bench(Config c) : c_(std::move(c)), data_(c_.ranks) {
    for (int r = 0; r < c_.ranks; ++r) MakeRankData(&data_[r], c_.bytes, r);
  }

  // Save + commit through `store`; fills stall samples; returns seconds.
  // Checkpointers (and their staging buffers) live as long as the bench, so
  // the first call per store is the warm-up.
  double SaveAll(ObjectStore* store, int64_t step, std::vector<double>* stalls) {
    auto& ckpts = checkpointers_[store];
    if (ckpts.empty()) {
      barriers_[store] = std::make_unique<InProcessCommitBarrier>(c_.ranks);
      for (int r = 0; r < c_.ranks; ++r) {
        CheckpointerOptions o;
        o.job = "bench";
        o.rank = r;
        o.world_size = c_.ranks;
        o.retention.keep_last = 1;
        ckpts.push_back(std::make_unique<Checkpointer>(store, barriers_[store].get(), o));
      }
    }
    return Parallel(c_.ranks, [&](int r) {
      auto t0 = Clock::now();
      auto started = ckpts[r]->Save(step, data_[r].ts);
      double stall = Since(t0);
      auto upload_start = Clock::now();
      absl::Status s = started.ok() ? ckpts[r]->Wait() : started.status();
      if (!s.ok()) {
        std::cerr << "checkpoint failed: " << s << "\n";
        std::exit(1);
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (getenv("BENCH_DEBUG")) {
        CheckpointStats st = ckpts[r]->stats();
        std::cerr << "rank " << r << " stall " << st.stall_seconds << " upload " << st.upload_seconds
                  << " total " << st.total_seconds << " wall " << Since(t0) << "\n";
      }
      if (stalls) stalls->push_back(stall);
      (void)upload_start;
      return ckpts[r]->stats().commit_seconds;  // Save returned .. commit durable
    });
  }

  double RestoreAll(ObjectStore* store) {
    return Parallel(c_.ranks, [&](int r) {
      RankData& d = data_[r];
      std::vector<TensorRef> targets = d.ts.tensors;
      for (TensorRef& t : targets) t.data = d.scratch.data() + (static_cast<char*>(t.data) - d.state.data());
      auto t0 = Clock::now();
      auto result = Restore(store, RestoreOptions{"bench", r, c_.ranks, nullptr, false}, targets);
      double s = Since(t0);
      if (!result.ok() || std::memcmp(d.scratch.data(), d.state.data(), c_.bytes) != 0) {
        std::cerr << "restore failed or differs: " << result.status() << "\n";
        std::exit(1);
      }
      return s;
    });
  }

  // The stall through an in-process node checkpoint service (staging in
  // /dev/shm, uploads to file://): each rep hands every rank's state off,
  // then waits for the uploads so the next stall measures the copy alone.
  // Interleaved with memcpy of the same bytes. Fills both sample vectors.
  void ServiceStalls(std::vector<double>* stalls, std::vector<double>* copies,
                     std::vector<double>* area_copies) {
    class NullReporter final : public ckptsvc::DurableReporter {
     public:
      absl::Status ShardDurable(const ckptsvc::DurableShard&) override { return absl::OkStatus(); }
    } reporter;
    ckptsvc::CheckpointServiceOptions o;
    o.socket_path = c_.dir + "/svc.sock";
    o.staging_dir = absl::StrCat("/dev/shm/athanor-bench-checkpoint-", getpid());
    o.budget_bytes = (c_.bytes + (1 << 20)) * c_.ranks;
    o.registry_dir = c_.dir + "/svc-registry";
    const std::string root = c_.dir + "/svc-store";
    // What the agent does before it starts a rank: the service serves only
    // registered ranks (checkpoint/service/rank_registry.h).
    auto registry = ckptsvc::RankRegistry::Open(o.registry_dir);
    if (!registry.ok()) {
      std::cerr << "rank registry: " << registry.status() << "\n";
      std::exit(1);
    }
    for (int r = 0; r < c_.ranks; ++r) {
      absl::Status registered = (*registry)->Register({"bench-service", 0, r, geteuid(), "file://" + root, 1});
      if (!registered.ok()) {
        std::cerr << "rank registry: " << registered << "\n";
        std::exit(1);
      }
    }
    auto service = ckptsvc::CheckpointService::Start(
        o, &reporter,
        [root](const std::string&, const std::map<std::string, std::string>&)
            -> absl::StatusOr<std::unique_ptr<ObjectStore>> {
          auto store = FileObjectStore::Open(root);
          if (!store.ok()) return store.status();
          return std::unique_ptr<ObjectStore>(std::move(*store));
        });
    if (!service.ok()) {
      std::cerr << "checkpoint service: " << service.status() << "\n";
      std::exit(1);
    }
    std::vector<std::unique_ptr<ServiceCheckpointer>> clients;
    for (int r = 0; r < c_.ranks; ++r) {
      ServiceCheckpointerOptions co;
      co.socket_path = o.socket_path;
      co.job = "bench-service";
      co.rank = r;
      co.world_size = c_.ranks;
      co.uri = "file://" + root;
      co.keep_last = 1;
      auto client = ServiceCheckpointer::Connect(co);
      if (!client.ok()) {
        std::cerr << "checkpoint service: " << client.status() << "\n";
        std::exit(1);
      }
      clients.push_back(std::move(*client));
    }
    for (int i = 0; i <= c_.reps; ++i) {  // i == 0: warm-up
      if (i % 2 == 1 && i > 0) copies->push_back(MemcpyAll());
      double slowest = Parallel(c_.ranks, [&](int r) {
        auto t0 = Clock::now();
        absl::StatusOr<bool> handed = clients[r]->Save(1 + i, data_[r].ts);
        double stall = Since(t0);
        // The service's answer to the hand-off (Save does not wait for it).
        absl::Status accepted = handed.ok() ? clients[r]->Wait() : handed.status();
        if (!accepted.ok() || !*handed) {
          std::cerr << "hand-off failed: " << accepted << "\n";
          std::exit(1);
        }
        return stall;
      });
      (*service)->WaitIdle();
      if (i == 0) continue;
      stalls->push_back(slowest);
      double copy = 0;
      for (auto& client : clients) copy = std::max(copy, client->stats().copy_seconds);
      area_copies->push_back(copy);
      if (i % 2 == 0) copies->push_back(MemcpyAll());
    }
    clients.clear();
    service->reset();
    std::system(absl::StrCat("rm -rf '", root, "'").c_str());
  }

  double MemcpyAll() {
    return Parallel(c_.ranks, [&](int r) {
      auto t0 = Clock::now();
      std::memcpy(data_[r].scratch.data(), data_[r].state.data(), c_.bytes);
      return Since(t0);
    });
  }

  double WriteFsyncAll(const std::string& dir) {
    return Parallel(c_.ranks, [&](int r) {
      std::string path = absl::StrCat(dir, "/baseline-", r);
      auto t0 = Clock::now();
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      for (uint64_t pos = 0; pos < c_.bytes;) {
        ssize_t n = ::write(fd, data_[r].state.data() + pos, std::min<uint64_t>(8 << 20, c_.bytes - pos));
        if (n <= 0) break;
        pos += static_cast<uint64_t>(n);
      }
      ::fsync(fd);
      ::close(fd);
      return Since(t0);
    });
  }

  double ReadAll(const std::string& dir) {
    return Parallel(c_.ranks, [&](int r) {
      std::string path = absl::StrCat(dir, "/baseline-", r);
      auto t0 = Clock::now();
      int fd = ::open(path.c_str(), O_RDONLY);
      for (uint64_t pos = 0; pos < c_.bytes;) {
        ssize_t n = ::read(fd, data_[r].scratch.data() + pos, c_.bytes - pos);
        if (n <= 0) break;
        pos += static_cast<uint64_t>(n);
      }
      ::close(fd);
      return Since(t0);
    });
  }

  // read() of the baseline file as ReadAll does, then CRC32C over what was
  // read in 4 MiB pieces right after each: the floor of a checked restore
  // that does not overlap the two.
  double ReadCrcAll(const std::string& dir, uint64_t piece) {
    return Parallel(c_.ranks, [&](int r) {
      std::string path = absl::StrCat(dir, "/baseline-", r);
      auto t0 = Clock::now();
      int fd = ::open(path.c_str(), O_RDONLY);
      uint32_t crc = 0;
      for (uint64_t pos = 0; pos < c_.bytes;) {
        ssize_t n = ::read(fd, data_[r].scratch.data() + pos, std::min(piece, c_.bytes - pos));
        if (n <= 0) break;
        crc = crc32c::Extend(crc, data_[r].scratch.data() + pos, static_cast<size_t>(n));
        pos += static_cast<uint64_t>(n);
      }
      ::close(fd);
      crc_sink_ ^= crc;
      return Since(t0);
    });
  }

  double S3cmdAll(int port, const std::string& dir, bool put) {
    return Parallel(c_.ranks, [&](int r) {
      std::string local = absl::StrCat(dir, "/baseline-", r);
      std::string remote = absl::StrCat("s3://bench/s3cmd/baseline-", r);
      auto t0 = Clock::now();
      auto out = put ? testing_s3::RunS3cmd(port, {"put", local, remote})
                     : testing_s3::RunS3cmd(port, {"get", "--force", remote, local + ".got"});
      if (!out.ok()) {
        std::cerr << "s3cmd failed: " << out.status() << "\n";
        std::exit(1);
      }
      return Since(t0);
    });
  }

  std::vector<Row> Run() {
    std::vector<Row> rows;
    std::vector<double> stalls, copies, file_up, file_base, file_restore, file_read, read_crc,
        read_crc_small;
    auto store = FileObjectStore::Open(c_.dir + "/store");
    if (!store.ok()) {
      std::cerr << store.status() << "\n";
      std::exit(1);
    }
    SaveAll(store->get(), 1, nullptr);  // warm-up
    WriteFsyncAll(c_.dir);
    for (int i = 0; i < c_.reps; ++i) {
      // Alternate which side goes first: the shared disk's state after the
      // previous operation otherwise favours one of them.
      copies.push_back(MemcpyAll());
      if (i % 2 == 1) file_base.push_back(WriteFsyncAll(c_.dir));
      file_up.push_back(SaveAll(store->get(), 2 + i, &stalls));
      if (i % 2 == 0) file_base.push_back(WriteFsyncAll(c_.dir));
      if (i % 2 == 1) file_read.push_back(ReadAll(c_.dir));
      file_restore.push_back(RestoreAll(store->get()));
      if (i % 2 == 0) file_read.push_back(ReadAll(c_.dir));
      read_crc.push_back(ReadCrcAll(c_.dir, 4 << 20));
      read_crc_small.push_back(ReadCrcAll(c_.dir, 256 << 10));
    }
    rows.push_back({"stall (Save)", Median(stalls), Median(copies), "memcpy"});
    std::vector<double> service_stalls, service_copies, area_copies;
    ServiceStalls(&service_stalls, &service_copies, &area_copies);
    rows.push_back({"stall (service)", Median(service_stalls), Median(service_copies), "memcpy"});
    // Its phases: the copy into the staging area alone (the rest is the
    // stage and hand-off round trips).
    rows.push_back({"stall: area copy", Median(area_copies), Median(service_copies), "memcpy"});
    rows.push_back({"upload file://", Median(file_up), Median(file_base), "write+fsync"});
    rows.push_back({"restore file://", Median(file_restore), Median(file_read), "read"});
    // Phases of a checked restore: the same reads with CRC32C after each piece.
    rows.push_back({"read+crc32c (4 MiB)", Median(read_crc), Median(file_read), "read"});
    rows.push_back({"read+crc32c (256 KiB)", Median(read_crc_small), Median(file_read), "read"});
    if (c_.s3) {
      auto server = testing_s3::S3rverProcess::Start("bench");
      if (!server.ok()) {
        std::cerr << "skipping s3: " << server.status() << "\n";
        return rows;
      }
      auto options = ParseS3Options((*server)->Uri("ours", "part_size=16777216&upload_threads=4"), {});
      S3ObjectStore s3(*options);
      std::vector<double> up, base, restore, get;
      SaveAll(&s3, 1, nullptr);
      for (int i = 0; i < c_.reps; ++i) {
        if (i % 2 == 1) base.push_back(S3cmdAll((*server)->port(), c_.dir, true));
        up.push_back(SaveAll(&s3, 2 + i, nullptr));
        if (i % 2 == 0) base.push_back(S3cmdAll((*server)->port(), c_.dir, true));
        if (i % 2 == 1) get.push_back(S3cmdAll((*server)->port(), c_.dir, false));
        restore.push_back(RestoreAll(&s3));
        if (i % 2 == 0) get.push_back(S3cmdAll((*server)->port(), c_.dir, false));
      }
      rows.push_back({"upload s3 (s3rver)", Median(up), Median(base), "s3cmd put"});
      rows.push_back({"restore s3 (s3rver)", Median(restore), Median(get), "s3cmd get"});
      checkpointers_.erase(&s3);
    }
    return rows;
  }

 private:
  Config c_;
  std::vector<RankData> data_;
  std::map<ObjectStore*, std::unique_ptr<InProcessCommitBarrier>> barriers_;
  std::map<ObjectStore*, std::vector<std::unique_ptr<Checkpointer>>> checkpointers_;
  std::mutex mu_;
  std::atomic<uint32_t> crc_sink_{0};  // keeps the CRCs from being optimised away
};

int Main(int argc, char** argv) {
  Config c;
  std::string bytes_text = "1GiB";
  po::options_description desc("athanor-bench-checkpoint");
  desc.add_options()("bytes", po::value(&c.bytes)->default_value(c.bytes), "state bytes per rank")(
      "ranks", po::value(&c.ranks)->default_value(2), "ranks (threads)")(
      "reps", po::value(&c.reps)->default_value(3), "measured repetitions (median)")(
      "dir", po::value(&c.dir), "directory for file:// and baselines (default: $TMPDIR)")(
      "no-s3", "skip the s3rver measurements")("json", po::bool_switch(&c.json), "print JSON");
  ParsedCommandLine parsed;
  absl::Status status = ParseOptions(argc, argv, desc, "usage: athanor-bench-checkpoint [--bytes N]", &parsed);
  if (!status.ok()) {
    std::cerr << status.message() << "\n";
    return 2;
  }
  if (parsed.help) return 0;
  c.s3 = parsed.vars.count("no-s3") == 0;
  if (c.dir.empty()) c.dir = testing_s3::MakeTempDir("bench-ckpt");
  Bench bench(c);
  std::vector<Row> rows = bench.Run();
  double total = static_cast<double>(c.bytes) * c.ranks;
  nlohmann::json out = nlohmann::json::array();
  if (!c.json) {
    std::cout << absl::StrFormat("# %d ranks x %d bytes, median of %d\n", c.ranks, c.bytes, c.reps);
    std::cout << absl::StrFormat("%-22s %10s %10s %12s %10s %10s %8s\n", "what", "ours_s", "GB/s", "baseline",
                                 "base_s", "GB/s", "ratio");
  }
  for (const Row& r : rows) {
    bool stall = r.what.rfind("stall", 0) == 0;
    // Stall: ours/baseline time (goal <= 1.5). Others: throughput ratio (goal >= 0.8).
    double ratio = stall ? r.ours_s / r.base_s : r.base_s / r.ours_s;
    if (c.json) {
      out.push_back({{"what", r.what}, {"ours_s", r.ours_s}, {"ours_GBps", total / r.ours_s / 1e9},
                     {"baseline", r.base_name}, {"baseline_s", r.base_s},
                     {"baseline_GBps", total / r.base_s / 1e9}, {"ratio", ratio}});
    } else {
      std::cout << absl::StrFormat("%-22s %10.3f %10.2f %12s %10.3f %10.2f %8.2f\n", r.what, r.ours_s,
                                   total / r.ours_s / 1e9, r.base_name, r.base_s, total / r.base_s / 1e9, ratio);
    }
  }
  if (c.json) std::cout << out.dump(1) << "\n";
  std::system(absl::StrCat("rm -rf '", c.dir, "/store' '", c.dir, "'/baseline-*").c_str());
  return 0;
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) { return athanor::Main(argc, argv); }
