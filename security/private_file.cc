#include "security/private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace athanor::security {
namespace {

constexpr off_t kMaxFileBytes = 1 << 20;

absl::Status Errno(const std::string& what, const std::string& path, int err) {
  std::string msg = absl::StrCat(what, " ", path, ": ", strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EEXIST) return absl::AlreadyExistsError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<std::string> ReadFd(int fd, const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  if (st.st_size > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 1 MiB (", st.st_size, " bytes)"));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot read", path, errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

}  // namespace

absl::Status WritePrivateFile(const std::string& path, const std::string& data, bool overwrite) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  int fd = open(path.c_str(), flags, 0600);
  if (fd < 0) return Errno("cannot create", path, errno);
  // An existing file kept its old mode: narrow it before writing the secret.
  if (fchmod(fd, 0600) != 0) {
    int err = errno;
    close(fd);
    return Errno("cannot chmod", path, err);
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Errno("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) return Errno("cannot sync", path, errno);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Errno("cannot stat", path, err);
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::PermissionDeniedError(absl::StrCat(
        path, " is mode ", mode, ": a secret's file must be readable by its owner only (chmod 600)"));
  }
  absl::StatusOr<std::string> data = ReadFd(fd, path, st);
  close(fd);
  return data;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Errno("cannot stat", path, err);
  }
  absl::StatusOr<std::string> data = ReadFd(fd, path, st);
  close(fd);
  return data;
}

}  // namespace athanor::security
