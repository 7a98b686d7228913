#include "common/status.h"

namespace athanor {

absl::Status ErrnoStatus(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EINVAL:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EAGAIN:
    case EINTR:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace athanor
