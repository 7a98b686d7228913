// athanor-bench-progress: what a rank pays to keep its progress page, and
// what the agent pays to read one, each beside a baseline from the same run.
//
// Writer: one training step's publication (StepDone plus, per collective,
// CollectiveIssued + WaitBegin + WaitEnd) in ns, against the same number of
// relaxed atomic increments on a local counter. Reader: one ReadProgressPage
// (open, fstat, two preads, close) in us, against one stat() of the same file.
// Medians of 7 repetitions; a ratio column says how many baselines one costs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/progress_page.h"

namespace athanor {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double NsPerIter(int iters, F&& f) {
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / iters;
}

int Run(int collectives_per_step) {
  char tmpl[] = "/tmp/athanor-bench-progress-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string path = std::string(tmpl) + "/page";
  absl::StatusOr<std::unique_ptr<ProgressWriter>> w = ProgressWriter::Open(path);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  const int kSteps = 200000, kReads = 20000, kReps = 7;
  std::atomic<uint64_t> counter{0};
  const int stores = 1 + 3 * collectives_per_step;  // publications per step
  std::vector<double> page_ns, base_ns, read_us, stat_us;
  for (int rep = 0; rep < kReps; ++rep) {
    page_ns.push_back(NsPerIter(kSteps, [&](int i) {
      for (int c = 0; c < collectives_per_step; ++c) {
        uint64_t seq = (*w)->CollectiveIssued();
        (*w)->WaitBegin(seq, ProgressOp::kAllReduce);
        (*w)->WaitEnd();
      }
      (*w)->StepDone(i, 1.0, 2.0);
    }));
    base_ns.push_back(NsPerIter(kSteps, [&](int) {
      for (int s = 0; s < stores; ++s) counter.fetch_add(1, std::memory_order_relaxed);
    }));
    read_us.push_back(NsPerIter(kReads, [&](int) {
      if (!ReadProgressPage(path).ok()) std::abort();
    }) / 1000);
    stat_us.push_back(NsPerIter(kReads, [&](int) {
      struct stat st;
      if (stat(path.c_str(), &st) != 0) std::abort();
    }) / 1000);
  }
  std::printf("# athanor-bench-progress: medians of %d repetitions; %d collectives per step\n",
              kReps, collectives_per_step);
  std::printf("%-44s %12s %14s %8s\n", "operation", "cost", "baseline", "ratio");
  std::printf("%-44s %9.1f ns %11.1f ns %7.1fx\n", "rank: publish one step (writer)",
              Median(page_ns), Median(base_ns), Median(page_ns) / Median(base_ns));
  std::printf("%-44s %9.2f us %11.2f us %7.1fx\n", "agent: read one page (vs stat of it)",
              Median(read_us), Median(stat_us), Median(read_us) / Median(stat_us));
  std::printf("counter %llu\n", static_cast<unsigned long long>(counter.load()));
  unlink(path.c_str());
  rmdir(tmpl);
  return 0;
}

}  // namespace
}  // namespace athanor

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: athanor-bench-progress [COLLECTIVES_PER_STEP (0..10000, default 4)]\n"
      "Times a rank's progress-page updates (hang detection) against a step without them.\n";
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  char* end = nullptr;
  long collectives = argc > 1 ? std::strtol(argv[1], &end, 10) : 4;
  if (argc > 2 || (argc > 1 && (end == argv[1] || *end != '\0')) || collectives < 0 || collectives > 10000) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return athanor::Run(static_cast<int>(collectives));
}
