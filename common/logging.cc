#include "common/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace athanor {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
ABSL_CONST_INIT absl::Mutex g_tags_mu(absl::kConstInit);
std::string* g_tags ABSL_GUARDED_BY(g_tags_mu) = new std::string();  // leaked on purpose: used at exit

const char* Basename(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

}  // namespace

void SetLogTags(std::string tags) {
  absl::MutexLock lock(&g_tags_mu);
  *g_tags = std::move(tags);
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed)); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug") *level = LogLevel::kDebug;
  else if (text == "info") *level = LogLevel::kInfo;
  else if (text == "warning") *level = LogLevel::kWarning;
  else if (text == "error") *level = LogLevel::kError;
  else return false;
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  static const char kLetters[] = "DIWEF";
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm parts;
  localtime_r(&tv.tv_sec, &parts);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d%02d %02d:%02d:%02d.%03d", parts.tm_mon + 1,
                parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec,
                static_cast<int>(tv.tv_usec / 1000));
  stream_ << kLetters[static_cast<int>(level)] << stamp << ' ';
  {
    absl::MutexLock lock(&g_tags_mu);
    if (!g_tags->empty()) stream_ << '[' << *g_tags << "] ";
  }
  stream_ << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string text = stream_.str();
  ssize_t unused = ::write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace athanor
