#include "checkpoint/file/file_object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/uri.h"

namespace athanor {
namespace {

constexpr char kTempMarker[] = ".athanor-tmp-";

std::string Dirname(const std::string& path) { return path.substr(0, path.rfind('/')); }

absl::Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open ", path));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(absl::StrCat("fsync ", path), err);
  return absl::OkStatus();
}

// mkdir -p, fsyncing the parent of every directory it creates.
absl::Status MakeDirs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(absl::StrCat("mkdir ", path));
  }
  if (slash != std::string::npos && slash > 0) return FsyncPath(path.substr(0, slash));
  return absl::OkStatus();
}

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%012x", rng() & 0xffffffffffffULL);
}

class FileWritable final : public WritableObject {
 public:
  FileWritable(int fd, std::string temp, std::string target, PutMode mode)
      : fd_(fd), temp_(std::move(temp)), target_(std::move(target)), mode_(mode) {}
  ~FileWritable() override { Abort(); }

  absl::Status Append(absl::string_view data) override {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail(ErrnoStatus(absl::StrCat("write ", temp_)));
      p += n;
      left -= static_cast<size_t>(n);
      written_ += static_cast<uint64_t>(n);
    }
    // Start writeback of every full 8 MiB window now, so the disk works while
    // we keep writing and Close()'s fsync has little left to do.
    constexpr uint64_t kWindow = 8 << 20;
    while (written_ - flushed_ >= kWindow) {
      ::sync_file_range(fd_, static_cast<off_t>(flushed_), kWindow, SYNC_FILE_RANGE_WRITE);
      flushed_ += kWindow;
    }
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (::fsync(fd_) != 0) return Fail(ErrnoStatus(absl::StrCat("fsync ", temp_)));
    ::close(fd_);
    fd_ = -1;
    if (mode_ == PutMode::kCreateOnly) {
      if (::link(temp_.c_str(), target_.c_str()) != 0) {
        absl::Status status = ErrnoStatus(absl::StrCat("link ", target_));
        Abort();
        return status;
      }
      ::unlink(temp_.c_str());
    } else if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      return Fail(ErrnoStatus(absl::StrCat("rename to ", target_)));
    }
    temp_.clear();
    return FsyncPath(Dirname(target_));
  }

  void Abort() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!temp_.empty()) ::unlink(temp_.c_str());
    temp_.clear();
  }

 private:
  absl::Status Fail(absl::Status status) {
    Abort();
    return status;
  }

  int fd_;
  uint64_t written_ = 0;
  uint64_t flushed_ = 0;  // writeback started for [0, flushed_)
  std::string temp_;  // empty once renamed or removed
  std::string target_;
  PutMode mode_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FileObjectStore>> FileObjectStore::Open(const std::string& root) {
  if (root.empty() || root.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("file store root '", root, "' is not absolute"));
  }
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  RETURN_IF_ERROR(MakeDirs(clean));
  return std::unique_ptr<FileObjectStore>(new FileObjectStore(clean));
}

absl::StatusOr<std::unique_ptr<WritableObject>> FileObjectStore::OpenWrite(const std::string& key,
                                                                           PutMode mode) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  std::string target = absl::StrCat(root_, "/", key);
  std::string dir = Dirname(target);
  RETURN_IF_ERROR(MakeDirs(dir));
  std::string base = target.substr(dir.size() + 1);
  std::string temp = absl::StrCat(dir, "/.", base, kTempMarker, RandomSuffix());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(absl::StrCat("create ", temp));
  return std::unique_ptr<WritableObject>(new FileWritable(fd, temp, target, mode));
}

absl::StatusOr<std::string> FileObjectStore::Get(const std::string& key, uint64_t offset,
                                                 int64_t length) {
  if (length < 0) {
    ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
    if (offset > info.size) {
      return absl::OutOfRangeError(absl::StrCat(root_, "/", key, ": offset ", offset, " past size ", info.size));
    }
    length = static_cast<int64_t>(info.size - offset);
  }
  std::string out(static_cast<size_t>(length), '\0');
  RETURN_IF_ERROR(GetInto(key, offset, static_cast<uint64_t>(length), out.data()));
  return out;
}

absl::Status FileObjectStore::GetInto(const std::string& key, uint64_t offset, uint64_t length, char* dst) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  std::string path = absl::StrCat(root_, "/", key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status status = ErrnoStatus(absl::StrCat("stat ", path));
    ::close(fd);
    return status;
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size || offset + length > size) {
    ::close(fd);
    return absl::OutOfRangeError(
        absl::StrCat(path, ": range [", offset, ", ", offset + length, ") past size ", size));
  }
  uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, dst + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = n < 0 ? ErrnoStatus(absl::StrCat("read ", path))
                                  : absl::DataLossError(absl::StrCat(path, " shrank while reading"));
      ::close(fd);
      return status;
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> FileObjectStore::Head(const std::string& key) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  std::string path = absl::StrCat(root_, "/", key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(absl::StrCat("stat ", path));
  if (!S_ISREG(st.st_mode)) return absl::NotFoundError(absl::StrCat(path, " is not a file"));
  return ObjectInfo{key, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)};
}

absl::Status FileObjectStore::Walk(
    const std::string& prefix, const std::function<void(const std::string&, bool)>& visit) const {
  // Start at the deepest directory the prefix names, then filter by prefix.
  std::string start_rel = prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/'));
  std::vector<std::string> stack = {start_rel};
  while (!stack.empty()) {
    std::string rel = stack.back();
    stack.pop_back();
    std::string dir = rel.empty() ? root_ : absl::StrCat(root_, "/", rel);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      return ErrnoStatus(absl::StrCat("opendir ", dir));
    }
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string child = rel.empty() ? name : absl::StrCat(rel, "/", name);
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st;
        is_dir = ::stat(absl::StrCat(root_, "/", child).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      if (is_dir) {
        // Only descend where the prefix can still match.
        std::string with_slash = child + "/";
        if (absl::StartsWith(with_slash, prefix) || absl::StartsWith(prefix, with_slash)) {
          stack.push_back(child);
        }
        continue;
      }
      bool temporary = name.front() == '.' && absl::StrContains(name, kTempMarker);
      if (temporary) {
        // Report a temporary under the key it was going to become.
        std::string target = name.substr(1, name.find(kTempMarker) - 1);
        std::string target_key = rel.empty() ? target : absl::StrCat(rel, "/", target);
        if (absl::StartsWith(target_key, prefix)) visit(child, true);
      } else if (absl::StartsWith(child, prefix)) {
        visit(child, false);
      }
    }
    ::closedir(d);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ObjectInfo>> FileObjectStore::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  RETURN_IF_ERROR(Walk(prefix, [&](const std::string& key, bool temporary) {
    if (temporary) return;
    struct stat st;
    if (::stat(absl::StrCat(root_, "/", key).c_str(), &st) != 0) return;  // deleted meanwhile
    out.push_back(ObjectInfo{key, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)});
  }));
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

absl::Status FileObjectStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateObjectKey(key));
  std::string path = absl::StrCat(root_, "/", key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus(absl::StrCat("unlink ", path));
  // Remove directories the delete emptied (rmdir fails harmlessly otherwise).
  for (std::string dir = Dirname(path); dir.size() > root_.size(); dir = Dirname(dir)) {
    if (::rmdir(dir.c_str()) != 0) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PendingUpload>> FileObjectStore::ListPendingUploads(
    const std::string& prefix) {
  std::vector<PendingUpload> out;
  RETURN_IF_ERROR(Walk(prefix, [&](const std::string& key, bool temporary) {
    if (temporary) out.push_back(PendingUpload{key, key});
  }));
  return out;
}

absl::Status FileObjectStore::AbortPendingUpload(const PendingUpload& upload) {
  return Delete(upload.upload_id);
}

void RegisterFileObjectStore() {
  RegisterObjectStoreScheme("file", [](const std::string& uri)
                                        -> absl::StatusOr<std::unique_ptr<ObjectStore>> {
    ASSIGN_OR_RETURN(Uri parsed, ParseUri(uri));
    std::string root = parsed.host.empty() ? parsed.path : absl::StrCat("/", parsed.host, parsed.path);
    ASSIGN_OR_RETURN(std::unique_ptr<FileObjectStore> store, FileObjectStore::Open(root));
    return std::unique_ptr<ObjectStore>(std::move(store));
  });
}

}  // namespace athanor
