#include "storage/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace athanor::storage {
namespace {

constexpr size_t kChunk = 1 << 16;

std::string ErrnoText(int err) { return std::strerror(err); }

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", ErrnoText(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

struct ReadArchiveDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteArchiveDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using ReadArchive = std::unique_ptr<archive, ReadArchiveDeleter>;
using WriteArchive = std::unique_ptr<archive, WriteArchiveDeleter>;
using Entry = std::unique_ptr<archive_entry, EntryDeleter>;

std::string ArchiveError(archive* a) {
  const char* s = archive_error_string(a);
  return s != nullptr ? s : "unknown libarchive error";
}

// A name for a temporary sibling of `path` that no other process picks.
std::string TempSibling(const std::string& path) {
  std::random_device rd;
  return absl::StrCat(path, ".tmp-", getpid(), "-", rd());
}

// Appends the paths under `root`/`rel` (relative to root) to `out`,
// without following symlinks.
absl::Status Walk(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? root : absl::StrCat(root, "/", rel);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, absl::StrCat("opendir ", dir));
  std::vector<std::string> names;
  errno = 0;
  while (dirent* de = readdir(d)) {
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(std::move(name));
  }
  int err = errno;
  closedir(d);
  if (err != 0) return ErrnoStatus(err, absl::StrCat("readdir ", dir));
  for (const std::string& name : names) {
    std::string child = rel.empty() ? name : absl::StrCat(rel, "/", name);
    out->push_back(child);
    struct stat st;
    std::string full = absl::StrCat(root, "/", child);
    if (lstat(full.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("lstat ", full));
    if (S_ISDIR(st.st_mode)) {
      if (absl::Status s = Walk(root, child, out); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteOne(archive* a, const std::string& root, const std::string& rel) {
  std::string full = absl::StrCat(root, "/", rel);
  struct stat st;
  if (lstat(full.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("lstat ", full));
  Entry e(archive_entry_new());
  archive_entry_set_pathname(e.get(), rel.c_str());
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  archive_entry_set_mtime(e.get(), st.st_mtime, 0);
  mode_t perm = st.st_mode & 0777;  // setuid, setgid and sticky never travel
  int fd = -1;
  if (S_ISREG(st.st_mode)) {
    archive_entry_set_mode(e.get(), AE_IFREG | perm);
    archive_entry_set_size(e.get(), st.st_size);
    fd = open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", full));
  } else if (S_ISDIR(st.st_mode)) {
    archive_entry_set_mode(e.get(), AE_IFDIR | perm);
    archive_entry_set_size(e.get(), 0);
  } else if (S_ISLNK(st.st_mode)) {
    std::vector<char> target(PATH_MAX + 1);
    ssize_t n = readlink(full.c_str(), target.data(), target.size() - 1);
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("readlink ", full));
    target[static_cast<size_t>(n)] = '\0';
    archive_entry_set_mode(e.get(), AE_IFLNK | 0777);
    archive_entry_set_symlink(e.get(), target.data());
    archive_entry_set_size(e.get(), 0);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(full, ": only regular files, folders and symlinks can be packed"));
  }
  absl::Status status;
  if (archive_write_header(a, e.get()) < ARCHIVE_WARN) {
    status = absl::InternalError(absl::StrCat("tar header for ", rel, ": ", ArchiveError(a)));
  }
  if (fd >= 0) {
    // Copies exactly the size written in the header: a file that grows or
    // shrinks while being packed is an error, not a corrupt tar.
    int64_t left = st.st_size;
    std::vector<char> buf(kChunk);
    while (status.ok() && left > 0) {
      ssize_t n = read(fd, buf.data(), static_cast<size_t>(std::min<int64_t>(left, kChunk)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = ErrnoStatus(errno, absl::StrCat("read ", full));
      } else if (n == 0) {
        status = absl::AbortedError(absl::StrCat(full, " shrank while being packed"));
      } else if (archive_write_data(a, buf.data(), static_cast<size_t>(n)) != n) {
        status = absl::InternalError(absl::StrCat("tar data for ", rel, ": ", ArchiveError(a)));
      } else {
        left -= n;
      }
    }
    close(fd);
  }
  return status;
}

// Splits an entry's path into clean components: refuses absolute paths and
// "..", drops "." and empty ones. An empty result is the tree's root.
absl::StatusOr<std::string> CleanEntryPath(const char* raw, const char* what) {
  if (raw == nullptr) return absl::InvalidArgumentError(absl::StrCat("tar ", what, " without a name"));
  std::string path = raw;
  if (!path.empty() && path[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat("tar ", what, " '", path, "' is absolute"));
  }
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("tar ", what, " '", path, "' contains '..'"));
    }
    parts.emplace_back(part);
  }
  return absl::StrJoin(parts, "/");
}

absl::Status CopyData(archive* in, archive* out, const std::string& rel) {
  const void* buf;
  size_t size;
  la_int64_t offset;
  while (true) {
    int r = archive_read_data_block(in, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) return absl::OkStatus();
    if (r < ARCHIVE_WARN) {
      return absl::DataLossError(absl::StrCat("tar data of ", rel, ": ", ArchiveError(in)));
    }
    if (archive_write_data_block(out, buf, size, offset) < ARCHIVE_WARN) {
      return ErrnoStatus(archive_errno(out), absl::StrCat("write ", rel, ": ", ArchiveError(out)));
    }
  }
}

absl::Status UnpackInto(const std::string& tar_path, const std::string& root,
                        const UnpackOptions& options) {
  ReadArchive in(archive_read_new());
  archive_read_support_format_tar(in.get());
  archive_read_support_filter_gzip(in.get());
  if (archive_read_open_filename(in.get(), tar_path.c_str(), kChunk) != ARCHIVE_OK) {
    int err = archive_errno(in.get());
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("no tar at ", tar_path));
    return absl::DataLossError(absl::StrCat("open tar ", tar_path, ": ", ArchiveError(in.get())));
  }
  WriteArchive out(archive_write_disk_new());
  int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT;
  if (options.owner_uid >= 0) flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options(out.get(), flags);

  int64_t entries = 0;
  int64_t bytes = 0;
  while (true) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      return absl::DataLossError(absl::StrCat("tar ", tar_path, ": ", ArchiveError(in.get())));
    }
    ++entries;
    if (options.max_entries > 0 && entries > options.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tar ", tar_path, " has more than ", options.max_entries, " entries"));
    }
    absl::StatusOr<std::string> rel = CleanEntryPath(archive_entry_pathname(e), "entry");
    if (!rel.ok()) return rel.status();
    if (rel->empty()) continue;  // the "./" entry: the root is ours
    const char* hardlink = archive_entry_hardlink(e);
    mode_t type = archive_entry_filetype(e);
    if (hardlink != nullptr) {
      absl::StatusOr<std::string> target = CleanEntryPath(hardlink, "hard link target");
      if (!target.ok()) return target.status();
      if (target->empty()) {
        return absl::InvalidArgumentError(absl::StrCat("tar entry ", *rel, " is a hard link to the root"));
      }
      archive_entry_set_hardlink(e, absl::StrCat(root, "/", *target).c_str());
    } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tar entry ", *rel, " is not a regular file, folder or symlink (type 0", absl::Hex(type >> 12),
          "): device nodes, fifos and sockets are refused"));
    }
    if (type == AE_IFREG && archive_entry_size_is_set(e)) {
      int64_t size = archive_entry_size(e);
      if (size < 0) return absl::DataLossError(absl::StrCat("tar entry ", *rel, " has a negative size"));
      bytes += size;
      if (options.max_bytes > 0 && bytes > options.max_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("tar ", tar_path, " holds more than ", options.max_bytes, " bytes"));
      }
    }
    archive_entry_set_perm(e, archive_entry_perm(e) & ~static_cast<mode_t>(S_ISUID | S_ISGID));
    if (options.owner_uid >= 0) {
      archive_entry_set_uid(e, options.owner_uid);
      archive_entry_set_gid(e, options.owner_gid >= 0 ? options.owner_gid : options.owner_uid);
    }
    archive_entry_set_pathname(e, absl::StrCat(root, "/", *rel).c_str());
    if (archive_write_header(out.get(), e) < ARCHIVE_WARN) {
      int err = archive_errno(out.get());
      std::string msg = absl::StrCat("tar entry ", *rel, ": ", ArchiveError(out.get()));
      // libarchive's own refusals (a path through a symlink) carry no errno.
      if (err <= 0) return absl::InvalidArgumentError(msg);
      return ErrnoStatus(err, msg);
    }
    if (archive_entry_size(e) > 0) {
      if (absl::Status s = CopyData(in.get(), out.get(), *rel); !s.ok()) return s;
    }
    if (archive_write_finish_entry(out.get()) < ARCHIVE_WARN) {
      return absl::InternalError(absl::StrCat("tar entry ", *rel, ": ", ArchiveError(out.get())));
    }
  }
  // Close applies the folders' deferred modes and times.
  if (archive_write_close(out.get()) < ARCHIVE_WARN) {
    return absl::InternalError(absl::StrCat("finishing ", root, ": ", ArchiveError(out.get())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PackResult> PackTree(const std::string& dir, const std::string& tar_path) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", dir));
  if (!S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(dir, " is not a folder"));
  std::vector<std::string> paths;
  if (absl::Status s = Walk(dir, "", &paths); !s.ok()) return s;
  std::sort(paths.begin(), paths.end());

  std::string tmp = TempSibling(tar_path);
  absl::Status status;
  {
    WriteArchive a(archive_write_new());
    archive_write_set_format_pax_restricted(a.get());
    archive_write_set_bytes_in_last_block(a.get(), 1);  // no padding to 10 KiB
    if (archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK) {
      return absl::InternalError(absl::StrCat("create ", tmp, ": ", ArchiveError(a.get())));
    }
    for (const std::string& rel : paths) {
      status = WriteOne(a.get(), dir, rel);
      if (!status.ok()) break;
    }
    if (archive_write_close(a.get()) != ARCHIVE_OK && status.ok()) {
      status = absl::InternalError(absl::StrCat("finish ", tmp, ": ", ArchiveError(a.get())));
    }
  }
  if (status.ok() && rename(tmp.c_str(), tar_path.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("rename to ", tar_path));
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  if (stat(tar_path.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", tar_path));
  absl::StatusOr<std::string> digest = Sha256File(tar_path);
  if (!digest.ok()) return digest.status();
  return PackResult{*std::move(digest), static_cast<int64_t>(st.st_size)};
}

absl::Status UnpackTree(const std::string& tar_path, const std::string& dir,
                        const UnpackOptions& options) {
  std::filesystem::path target(dir);
  target = target.lexically_normal();
  if (target.has_filename() == false) target = target.parent_path();
  struct stat st;
  if (lstat(target.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " already exists"));
  }
  // libarchive refuses to write through any symlink on the path, the
  // folders above `dir` included: resolve those first.
  std::string parent = target.parent_path().empty() ? "." : target.parent_path().string();
  char* real = realpath(parent.c_str(), nullptr);
  if (real == nullptr) return ErrnoStatus(errno, absl::StrCat("resolve ", parent));
  std::string final_path = absl::StrCat(real, "/", target.filename().string());
  free(real);

  std::string tmp = TempSibling(final_path);
  if (mkdir(tmp.c_str(), 0755) != 0) return ErrnoStatus(errno, absl::StrCat("mkdir ", tmp));
  absl::Status status = UnpackInto(tar_path, tmp, options);
  if (status.ok() && options.owner_uid >= 0) {
    gid_t gid = static_cast<gid_t>(options.owner_gid >= 0 ? options.owner_gid : options.owner_uid);
    if (chown(tmp.c_str(), static_cast<uid_t>(options.owner_uid), gid) != 0) {
      status = ErrnoStatus(errno, absl::StrCat("chown ", tmp));
    }
  }
  if (status.ok() && rename(tmp.c_str(), final_path.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("rename to ", final_path));
  }
  if (!status.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);  // best effort: the error above is what matters
  }
  return status;
}

struct Sha256Hasher::State {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256Hasher::Sha256Hasher() : state_(new State) {
  state_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr);
}

Sha256Hasher::~Sha256Hasher() {
  EVP_MD_CTX_free(state_->ctx);
  delete state_;
}

void Sha256Hasher::Update(const void* data, size_t size) { EVP_DigestUpdate(state_->ctx, data, size); }

std::string Sha256Hasher::Finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, md, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  Sha256Hasher hasher;
  std::vector<char> buf(kChunk);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    hasher.Update(buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return hasher.Finish();
}

}  // namespace athanor::storage
