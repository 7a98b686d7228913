#include "worker/agent/workdir_archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/object_store.h"
#include "common/status.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

void Octal(char* field, size_t width, uint64_t value) {
  // width-1 octal digits, NUL-terminated.
  std::string s(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value > 0; value >>= 3) s[i] = static_cast<char>('0' + (value & 7));
  std::memcpy(field, s.data(), width - 1);
  field[width - 1] = '\0';
}

absl::Status AppendHeader(std::string* out, const std::string& name, bool dir, uint64_t size,
                          uint32_t mode, int64_t mtime) {
  char h[512];
  std::memset(h, 0, sizeof(h));
  std::string n = dir ? name + "/" : name;
  if (n.size() <= 100) {
    std::memcpy(h, n.data(), n.size());
  } else {
    size_t cut = n.rfind('/', std::min<size_t>(n.size() - 1, 155));
    if (cut == std::string::npos || cut == 0 || n.size() - cut - 1 > 100 || n.size() - cut - 1 == 0) {
      return absl::InvalidArgumentError(absl::StrCat("path too long for ustar: ", name));
    }
    std::memcpy(h, n.data() + cut + 1, n.size() - cut - 1);
    std::memcpy(h + 345, n.data(), cut);
  }
  Octal(h + 100, 8, mode & 07777);
  Octal(h + 108, 8, 0);
  Octal(h + 116, 8, 0);
  Octal(h + 124, 12, dir ? 0 : size);
  Octal(h + 136, 12, static_cast<uint64_t>(std::max<int64_t>(mtime, 0)));
  std::memset(h + 148, ' ', 8);
  h[156] = dir ? '5' : '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  Octal(h + 148, 7, sum);
  h[155] = ' ';
  out->append(h, sizeof(h));
  return absl::OkStatus();
}

}  // namespace

namespace {

// Appends everything under the folder `dir_fd` (named `rel` in the archive,
// "" for the top) to `out`, in name order, reached with openat and
// O_NOFOLLOW: a link the rank left (to a folder or file of root's or another
// tenant's) is skipped, never followed, even if it replaced a file or folder
// after it was listed.
absl::Status AppendFolder(int dir_fd, const std::string& rel, std::string* out) {
  int list_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = list_fd >= 0 ? fdopendir(list_fd) : nullptr;
  if (d == nullptr) {
    if (list_fd >= 0) close(list_fd);
    return absl::InternalError(absl::StrCat("cannot list ", rel.empty() ? "." : rel, ": ", strerror(errno)));
  }
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = rel.empty() ? name : rel + "/" + name;
    int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;  // a link (ELOOP), or gone: skipped, as symlinks always were
    struct stat st;
    if (fstat(fd, &st) != 0) {
      close(fd);
      continue;
    }
    absl::Status s = absl::OkStatus();
    if (S_ISDIR(st.st_mode)) {
      s = AppendHeader(out, path, true, 0, st.st_mode, st.st_mtime);
      if (s.ok()) s = AppendFolder(fd, path, out);
    } else if (S_ISREG(st.st_mode)) {
      std::string bytes;
      char buf[1 << 16];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0) bytes.append(buf, static_cast<size_t>(n));
      }
      s = AppendHeader(out, path, false, bytes.size(), st.st_mode, st.st_mtime);
      if (s.ok()) {
        *out += bytes;
        out->append((512 - bytes.size() % 512) % 512, '\0');
      }
    }
    close(fd);
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> TarDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", strerror(errno)));
  std::string out;
  absl::Status s = AppendFolder(fd, "", &out);
  close(fd);
  if (!s.ok()) return absl::InternalError(absl::StrCat(dir, ": ", s.message()));
  out.append(1024, '\0');  // two zero blocks end the archive
  return out;
}

absl::Status ArchiveAndRemove(const std::string& dir, const std::string& uri,
                              const std::string& key) {
  // Moved aside first, so that once the archive exists the dir is already gone.
  const std::string staged = dir + ".archiving";
  std::error_code ec;
  fs::rename(dir, staged, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot move ", dir, " aside: ", ec.message()));
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::string tar, TarDirectory(staged));
    ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> store, OpenObjectStore(uri));
    return store->Put(key, tar);
  }();
  if (!s.ok()) {
    fs::rename(staged, dir, ec);  // kept for a later look; the error below says why
    return s;
  }
  fs::remove_all(staged, ec);
  if (ec) return absl::InternalError(absl::StrCat("archived, but cannot remove ", staged, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace athanor::agent
