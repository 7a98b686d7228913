// One logging library for every process, with optional job/rank tags.
//
//   ATHANOR_LOG(INFO) << "registered node " << name;
//
// Lines go to stderr as "I1130 03:24:45.123 [job=7 rank=2] file.cc:42] text".
// Thread-safe: each line is formatted privately and written with one write().
// Tags and the minimum level are set once at start-up by the program's main.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace athanor {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Process-wide settings; call from main before starting threads.
void SetLogTags(std::string tags);          // e.g. "job=7 rank=2"; empty for none
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// Parses "debug", "info", "warning", "error"; false on anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes the line; aborts after a kFatal line
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream when the level is filtered out.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace athanor

#define ATHANOR_LOG_LEVEL_DEBUG ::athanor::LogLevel::kDebug
#define ATHANOR_LOG_LEVEL_INFO ::athanor::LogLevel::kInfo
#define ATHANOR_LOG_LEVEL_WARNING ::athanor::LogLevel::kWarning
#define ATHANOR_LOG_LEVEL_ERROR ::athanor::LogLevel::kError
#define ATHANOR_LOG_LEVEL_FATAL ::athanor::LogLevel::kFatal

#define ATHANOR_LOG(level)                                                  \
  (ATHANOR_LOG_LEVEL_##level < ::athanor::MinLogLevel())                     \
      ? (void)0                                                             \
      : ::athanor::LogVoidify() &                                           \
            ::athanor::LogMessage(ATHANOR_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

// For programmer errors only, never for I/O or RPC results.
#define ATHANOR_CHECK(cond) \
  (cond) ? (void)0          \
         : ::athanor::LogVoidify() & ::athanor::LogMessage(::athanor::LogLevel::kFatal, __FILE__, __LINE__).stream() << "Check failed: " #cond " "
