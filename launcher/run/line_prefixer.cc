#include "launcher/run/line_prefixer.h"

#include <unistd.h>

#include <cerrno>

namespace athanor {

void LinePrefixer::Feed(const char* data, size_t n) {
  partial_.append(data, n);
  size_t start = 0, nl;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    Emit(partial_.substr(start, nl - start + 1));
    start = nl + 1;
  }
  partial_.erase(0, start);
}

void LinePrefixer::Flush() {
  if (partial_.empty()) return;
  Emit(partial_ + "\n");
  partial_.clear();
}

void LinePrefixer::Emit(const std::string& line) {
  const std::string out = prefix_ + line;
  size_t done = 0;
  while (done < out.size()) {
    ssize_t w = write(out_fd_, out.data() + done, out.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // output closed: drop the line, keep the ranks running
    done += static_cast<size_t>(w);
  }
}

}  // namespace athanor
