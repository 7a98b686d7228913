#include "worker/agent/tenant_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace athanor::agent {
namespace {

// Whether `a` equals `b` or one lies inside the other.
bool Overlaps(const std::string& a, const std::string& b) {
  auto inside = [](const std::string& x, const std::string& dir) {
    return x == dir || (absl::StartsWith(x, dir) && (dir.back() == '/' || x[dir.size()] == '/'));
  };
  return inside(a, b) || inside(b, a);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void Reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::Status MakeTenantDir(const std::string& path, uid_t uid, mode_t mode,
                           const std::vector<std::string>& forbidden) {
  if (path.empty() || path[0] != '/') return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not absolute"));
  std::vector<std::string> parts = absl::StrSplit(path.substr(1), '/', absl::SkipEmpty());
  for (const std::string& p : parts) {
    if (p == "." || p == "..") {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds a '", p, "' part"));
    }
  }
  std::string normal = absl::StrCat("/", absl::StrJoin(parts, "/"));
  for (const std::string& f : forbidden) {
    if (!f.empty() && Overlaps(normal, f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", normal, "' lies in or above ", f, ", which ranks never see"));
    }
  }
  Fd dir(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return absl::InternalError(absl::StrCat("open /: ", strerror(errno)));
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    absl::StrAppend(&walked, "/", part);
    const bool last = i + 1 == parts.size();
    if (mkdirat(dir.get(), part.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", walked, ": ", strerror(errno)));
    }
    int next = openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int e = errno;
      if (e == ELOOP || e == ENOTDIR) {
        struct stat st;
        bool link = fstatat(dir.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
        return absl::InvalidArgumentError(absl::StrCat(walked, " is ", link ? "a link" : "not a folder",
                                                       "; a checkpoint folder is made only along real folders"));
      }
      return absl::InternalError(absl::StrCat("cannot open ", walked, ": ", strerror(e)));
    }
    dir.Reset(next);
  }
  if (fchown(dir.get(), uid, uid) != 0) return absl::InternalError(absl::StrCat("chown ", normal, ": ", strerror(errno)));
  if (fchmod(dir.get(), mode) != 0) return absl::InternalError(absl::StrCat("chmod ", normal, ": ", strerror(errno)));
  return absl::OkStatus();
}

}  // namespace athanor::agent
