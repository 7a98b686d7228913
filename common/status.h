// Error handling helpers on top of absl::Status / absl::StatusOr.
//
// Fallible functions return absl::Status or absl::StatusOr<T> with canonical
// codes; backend detail (errno, UCX status, HTTP status) goes in the message.
// Debian 12's abseil predates the upstream macros, so these are ours.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define ATHANOR_STATUS_CONCAT_INNER(a, b) a##b
#define ATHANOR_STATUS_CONCAT(a, b) ATHANOR_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status athanor_status_ = (expr);          \
    if (!athanor_status_.ok()) return athanor_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F());` declares/assigns x from a StatusOr, or
// returns its error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ATHANOR_ASSIGN_OR_RETURN_IMPL(ATHANOR_STATUS_CONCAT(athanor_statusor_, __LINE__), lhs, rexpr)
#define ATHANOR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

namespace athanor {

// An error status for a failed system call: "<what>: <strerror(errno)>",
// with a code chosen from errno (ENOENT -> NotFound, EEXIST -> AlreadyExists...).
absl::Status ErrnoStatus(absl::string_view what, int err = errno);

// Prefixes the message of a non-OK status with context, keeping its code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace athanor
