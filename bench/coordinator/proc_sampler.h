// Samples another process's threads, CPU time and memory from /proc/<pid>.
//
// ReadProcSample is a pure read; ProcSampler runs one background thread that
// samples every `period` and keeps the maxima. ProcSampler is thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor::bench {

struct ProcSample {
  int threads = 0;          // Threads:
  double cpu_s = 0;         // utime + stime, seconds
  int64_t rss_kb = 0;       // VmRSS:
  int64_t hwm_kb = 0;       // VmHWM: peak resident set
};

// nullopt when the process is gone or /proc cannot be parsed.
std::optional<ProcSample> ReadProcSample(pid_t pid);

class ProcSampler {
 public:
  ProcSampler(pid_t pid, std::chrono::milliseconds period);
  ~ProcSampler();  // stops and joins the sampling thread
  ProcSampler(const ProcSampler&) = delete;
  ProcSampler& operator=(const ProcSampler&) = delete;

  int max_threads() const;
  int64_t max_rss_kb() const;  // the largest of VmRSS and VmHWM seen

 private:
  void Loop();

  const pid_t pid_;
  const std::chrono::milliseconds period_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int max_threads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_rss_kb_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace athanor::bench
