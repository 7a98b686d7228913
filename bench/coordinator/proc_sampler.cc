#include "bench/coordinator/proc_sampler.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace athanor::bench {

std::optional<ProcSample> ReadProcSample(pid_t pid) {
  ProcSample s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  if (!status) return std::nullopt;
  std::string line;
  while (std::getline(status, line)) {
    std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() < 2) continue;
    if (f[0] == "Threads:") (void)absl::SimpleAtoi(f[1], &s.threads);
    if (f[0] == "VmRSS:") (void)absl::SimpleAtoi(f[1], &s.rss_kb);
    if (f[0] == "VmHWM:") (void)absl::SimpleAtoi(f[1], &s.hwm_kb);
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream ss;
  ss << stat.rdbuf();
  std::string text = ss.str();
  // The command name (field 2) may hold spaces: fields are counted after its ')'.
  size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); utime and stime are fields 14 and 15.
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return std::nullopt;
  }
  s.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return s;
}

ProcSampler::ProcSampler(pid_t pid, std::chrono::milliseconds period)
    : pid_(pid), period_(period), thread_([this] { Loop(); }) {}

ProcSampler::~ProcSampler() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void ProcSampler::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (std::optional<ProcSample> s = ReadProcSample(pid_)) {
      max_threads_ = std::max(max_threads_, s->threads);
      max_rss_kb_ = std::max({max_rss_kb_, s->rss_kb, s->hwm_kb});
    }
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::FromChrono(period_));
  }
}

int ProcSampler::max_threads() const {
  absl::MutexLock lock(&mu_);
  return max_threads_;
}

int64_t ProcSampler::max_rss_kb() const {
  absl::MutexLock lock(&mu_);
  return max_rss_kb_;
}

}  // namespace athanor::bench
