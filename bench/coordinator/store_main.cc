// athanor-bench-store: commit latency of the coordinator's state store under a
// stream of group-commit rounds, with the write-ahead log copied back by the
// store's background checkpointer (as the coordinator runs) against SQLite's
// automatic checkpoint inside the commit that reaches the threshold (the
// baseline), alternating in the same run.
//
//   athanor-bench-store [--rounds 20000] [--jobs-per-round 8] [--runs 3]
//                       [--dir /var/tmp] [--json]
//
// A round writes `jobs-per-round` job records in one transaction: half new
// jobs, half new snapshots of jobs from 100 rounds before (their transitions),
// as the committer's rounds do during a submission storm.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "testing/coordinator/latency.h"
#include "coordinator/store/sqlite/sqlite_store.h"
#include "coordinator/store/sqlite/wal_checkpointer.h"

namespace po = boost::program_options;

namespace athanor::bench {
namespace {

coord::JobRecord BenchJob(int64_t seq, bool placed) {
  coord::JobRecord job;
  job.id = std::to_string(seq);
  job.seq = seq;
  job.idempotency_key = absl::StrFormat("bench-%d-%d", seq % 16, seq);
  job.spec.name = job.idempotency_key;
  job.spec.tenant = "bench";
  job.spec.gpus_per_node = static_cast<int32_t>(seq % 8 + 1);
  job.spec.command = {"/bin/sh", "-c", "exit 0"};
  job.submit_time_unix = 1764600000 + seq / 1000;
  if (placed) {
    job.state = coord::JobState::kRunning;
    job.attempt = 1;
    job.allocated = true;
    job.allocation = {{0, absl::StrFormat("node-%05d", seq % 1000), 0, 0, {0, 1, 2}}};
    job.master_addr = "10.0.3.7";
    job.master_port = 29500;
    job.start_time_unix = job.submit_time_unix + 1;
    job.attempt_nodes = {{job.allocation[0].node}};
    job.usage = {{static_cast<double>(job.start_time_unix), 0, job.spec.gpus_per_node}};
  }
  return job;
}

struct ModeResult {
  std::string mode;
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0, rounds_per_s = 0;
  uint64_t checkpoints = 0;  // the background checkpointer's passes
  off_t wal_bytes = 0;       // the log file at the end
};

ModeResult RunMode(const std::string& dir, bool background, int rounds, int jobs_per_round) {
  const std::string path = dir + (background ? "/background.db" : "/inline.db");
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  coord::SqliteStore::WalOptions wal;
  wal.background = background;
  auto store = coord::SqliteStore::Open(path, wal);
  if (!store.ok()) {
    std::cerr << "athanor-bench-store: " << store.status() << "\n";
    std::exit(1);
  }
  std::vector<double> ms;
  ms.reserve(rounds);
  const int fresh = std::max(1, jobs_per_round / 2);
  int64_t next_seq = 1;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    coord::Changes changes;
    for (int i = 0; i < fresh; ++i) changes.jobs.push_back(BenchJob(next_seq++, false));
    for (int i = fresh; i < jobs_per_round; ++i) {
      const int64_t old = next_seq - 100 * fresh - i;
      if (old >= 1) changes.jobs.push_back(BenchJob(old, true));
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = (*store)->Commit(changes); !s.ok()) {
      std::cerr << "athanor-bench-store: commit " << r << ": " << s << "\n";
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ModeResult out;
  out.mode = background ? "background" : "inline";
  if (background) out.checkpoints = (*store)->checkpointer()->stats().checkpoints;
  struct stat st;
  if (stat((path + "-wal").c_str(), &st) == 0) out.wal_bytes = st.st_size;
  out.p50_ms = Percentile(ms, 50);
  out.p99_ms = Percentile(ms, 99);
  out.p999_ms = Percentile(ms, 99.9);
  out.max_ms = ms.back();  // sorted by Percentile
  out.rounds_per_s = rounds / elapsed;
  return out;
}

int Run(int argc, char** argv) {
  int rounds = 20000, jobs_per_round = 8, runs = 3;
  std::string dir;
  bool json = false;
  po::options_description desc("athanor-bench-store options");
  desc.add_options()
      ("help", "this text")
      ("rounds", po::value(&rounds)->default_value(20000), "commits per mode and run")
      ("jobs-per-round", po::value(&jobs_per_round)->default_value(8), "job records each commit writes")
      ("runs", po::value(&runs)->default_value(3), "runs; each times both modes, alternating which goes first")
      ("dir", po::value(&dir)->default_value(""),
       "folder for the databases (default: a fresh one under $TMPDIR or /tmp, removed after)")
      ("json", po::bool_switch(&json), "print JSON instead of the table");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "athanor-bench-store: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Commit latency of the coordinator's state store (SQLite, WAL, synchronous=FULL):\n"
                 "the background checkpointer against SQLite's checkpoint inside commits.\n\n"
              << desc;
    return 0;
  }
  if (rounds < 100 || jobs_per_round < 1 || runs < 1) {
    std::cerr << "athanor-bench-store: --rounds must be at least 100, --jobs-per-round and --runs at least 1\n";
    return 2;
  }
  bool made_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/athanor_bench_store.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "athanor-bench-store: cannot create a folder from " << tmpl << "\n";
      return 1;
    }
    dir = tmpl;
    made_dir = true;
  } else if (!std::filesystem::is_directory(dir)) {
    std::cerr << "athanor-bench-store: --dir " << dir << " is not a folder\n";
    return 2;
  }
  std::vector<std::pair<ModeResult, ModeResult>> results;  // inline, background
  for (int run = 0; run < runs; ++run) {
    if (!json) std::cerr << "run " << run + 1 << " of " << runs << "...\n";
    ModeResult in, bg;
    if (run % 2 == 0) {
      in = RunMode(dir, false, rounds, jobs_per_round);
      bg = RunMode(dir, true, rounds, jobs_per_round);
    } else {
      bg = RunMode(dir, true, rounds, jobs_per_round);
      in = RunMode(dir, false, rounds, jobs_per_round);
    }
    results.emplace_back(in, bg);
  }
  if (made_dir) std::filesystem::remove_all(dir);
  std::vector<double> p99_ratio, max_ratio, rate_ratio;
  for (const auto& [in, bg] : results) {
    p99_ratio.push_back(bg.p99_ms > 0 ? in.p99_ms / bg.p99_ms : 0);
    max_ratio.push_back(bg.max_ms > 0 ? in.max_ms / bg.max_ms : 0);
    rate_ratio.push_back(in.rounds_per_s > 0 ? bg.rounds_per_s / in.rounds_per_s : 0);
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [in, bg] : results) {
      for (const ModeResult* m : {&in, &bg}) {
        out.push_back({{"mode", m->mode}, {"p50_ms", m->p50_ms}, {"p99_ms", m->p99_ms},
                       {"p999_ms", m->p999_ms}, {"max_ms", m->max_ms}, {"rounds_per_s", m->rounds_per_s},
                       {"checkpoints", m->checkpoints}, {"wal_bytes", m->wal_bytes}});
      }
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%d rounds of %d job records per mode and run\n", rounds, jobs_per_round);
  std::cout << absl::StrFormat("%4s %-10s %8s %8s %8s %8s %9s %6s %8s\n", "run", "mode", "p50_ms", "p99_ms",
                               "p999_ms", "max_ms", "rounds/s", "ckpts", "wal_MiB");
  for (size_t i = 0; i < results.size(); ++i) {
    for (const ModeResult* m : {&results[i].first, &results[i].second}) {
      std::cout << absl::StrFormat("%4d %-10s %8.2f %8.2f %8.2f %8.2f %9.0f %6d %8.1f\n", i + 1, m->mode,
                                   m->p50_ms, m->p99_ms, m->p999_ms, m->max_ms, m->rounds_per_s,
                                   m->checkpoints, m->wal_bytes / 1048576.0);
    }
  }
  auto list = [](std::vector<double> v) {
    std::string s;
    for (double x : v) s += absl::StrFormat("%s%.2f", s.empty() ? "" : ", ", x);
    return absl::StrFormat("%s (median %.2f)", s, Percentile(v, 50));
  };
  std::cout << "inline/background p99: " << list(p99_ratio) << "\n";
  std::cout << "inline/background max: " << list(max_ratio) << "\n";
  std::cout << "background/inline rounds/s: " << list(rate_ratio) << "\n";
  return 0;
}

}  // namespace
}  // namespace athanor::bench

int main(int argc, char** argv) { return athanor::bench::Run(argc, argv); }
