// Fuzzes the URI parser and host:port splitter; a parsed URI must print to
// a string that parses back to the same URI.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto uri = athanor::ParseUri(text); uri.ok()) {
    auto again = athanor::ParseUri(uri->ToString());
    if (!again.ok() || again->scheme != uri->scheme || again->host != uri->host ||
        again->path != uri->path || again->query != uri->query) {
      __builtin_trap();
    }
  }
  std::string host;
  int port = 0;
  if (athanor::SplitHostPort(text, &host, &port).ok() && (port < 1 || port > 65535)) __builtin_trap();
  return 0;
}
