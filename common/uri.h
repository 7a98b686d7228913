// URIs as used for object stores and endpoints:
//   file:///var/ckpt            scheme=file, path=/var/ckpt
//   s3://bucket/prefix?region=x scheme=s3, host=bucket, path=/prefix, query={region:x}
//   /plain/path                 scheme=file (a bare path is a file URI)
#pragma once

#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace athanor {

struct Uri {
  std::string scheme;
  std::string host;  // authority without user info; may include ":port"
  std::string path;  // starts with '/' when not empty
  std::map<std::string, std::string> query;

  // Prints a URI that ParseUri reads back as this one: query keys and values
  // percent-encoded, a bare file path as itself.
  std::string ToString() const;
};

// InvalidArgument naming the problem for an empty URI, a missing scheme
// separator, or a malformed (percent-encoded) query.
absl::StatusOr<Uri> ParseUri(absl::string_view text);

// Splits "host:port" (or "[v6]:port"); InvalidArgument when the port is
// missing or not in 1..65535.
absl::Status SplitHostPort(absl::string_view text, std::string* host, int* port);

}  // namespace athanor
