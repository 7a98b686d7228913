// LinePrefixer: turns a byte stream into whole lines, each prefixed with a
// tag like "[3] ", written to one output fd with one write() per line so that
// lines from different ranks never interleave mid-line. A last line without
// a newline is completed at Flush(). Not thread-safe; one per stream.
#pragma once

#include <string>

namespace athanor {

class LinePrefixer {
 public:
  LinePrefixer(std::string prefix, int out_fd) : prefix_(std::move(prefix)), out_fd_(out_fd) {}
  void Feed(const char* data, size_t n);
  void Flush();

 private:
  void Emit(const std::string& line);

  const std::string prefix_;
  const int out_fd_;
  std::string partial_;
};

}  // namespace athanor
