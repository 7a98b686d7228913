#include "worker/agent/rank_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::agent {
namespace {

absl::Status LinkOrWrongType(const std::string& path, int err) {
  if (err == ELOOP || err == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is a link or not a folder where the agent expects its own; not following it"));
  }
  return ErrnoStatus(absl::StrCat("open ", path), err);
}

// The attempt's log folder, walked from the work dir without following a
// link; made (root's, 0755) where missing when `create`.
absl::StatusOr<int> OpenLogDir(const std::string& work_dir, const RankKey& key, bool create) {
  ASSIGN_OR_RETURN(std::string log, RankSupervisor::LogPath(work_dir, key));  // checks the job id
  (void)log;
  int dir = open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return ErrnoStatus(absl::StrCat("open ", work_dir));
  std::string path = work_dir;
  for (const std::string& part : std::vector<std::string>{"jobs", key.job_id, absl::StrCat("attempt-", key.attempt)}) {
    path += "/" + part;
    if (create && mkdirat(dir, part.c_str(), 0755) != 0 && errno != EEXIST) {
      absl::Status s = ErrnoStatus(absl::StrCat("mkdir ", path));
      close(dir);
      return s;
    }
    int next = openat(dir, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    close(dir);
    if (next < 0) {
      if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
      return LinkOrWrongType(path, err);
    }
    dir = next;
  }
  return dir;
}

absl::StatusOr<int> OpenLog(const std::string& work_dir, const RankKey& key, bool append) {
  ASSIGN_OR_RETURN(int dir, OpenLogDir(work_dir, key, append));
  const std::string name = absl::StrCat("rank-", key.rank, ".log");
  const std::string path = absl::StrCat(work_dir, "/jobs/", key.job_id, "/attempt-", key.attempt, "/", name);
  // O_NONBLOCK: a FIFO planted there must not hang the agent in open or read.
  const int flags = append ? O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
                           : O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = openat(dir, name.c_str(), flags, 0640);
  const int err = errno;
  close(dir);
  if (fd < 0) {
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    if (err == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is a link; the agent does not follow it"));
    }
    return ErrnoStatus(absl::StrCat("open ", path), err);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  fcntl(fd, F_SETFL, append ? O_APPEND : 0);  // blocking again: a regular file
  return fd;
}

}  // namespace

absl::StatusOr<int> OpenRankLogForAppend(const std::string& work_dir, const RankKey& key) {
  return OpenLog(work_dir, key, /*append=*/true);
}

absl::StatusOr<int> OpenRankLogForRead(const std::string& work_dir, const RankKey& key) {
  return OpenLog(work_dir, key, /*append=*/false);
}

absl::Status AppendToRankLog(const std::string& work_dir, const RankKey& key, const std::string& text) {
  ASSIGN_OR_RETURN(int fd, OpenRankLogForAppend(work_dir, key));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoStatus("append to the rank log");
      close(fd);
      return s;
    }
    off += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace athanor::agent
