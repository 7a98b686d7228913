// Files that hold secrets (keys, tokens): created mode 0600 and refused when
// anyone but their owner may read them. Thread-compatible; plain file I/O.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace athanor::security {

// Creates `path` with mode 0600 (O_EXCL unless `overwrite`) and writes `data`.
// AlreadyExists when it exists and !overwrite; Internal with errno otherwise.
absl::Status WritePrivateFile(const std::string& path, const std::string& data,
                              bool overwrite = false);

// Reads `path`, refusing (PermissionDenied naming the mode) a file that its
// group or others may read or write. Trailing whitespace is kept; NotFound
// when missing. Files above 1 MiB are refused (InvalidArgument).
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path);

// Reads a public file (certificates): NotFound / InvalidArgument past 1 MiB.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace athanor::security
