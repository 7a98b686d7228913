#include "checkpoint/service/rank_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace athanor::ckptsvc {
namespace {

constexpr size_t kMaxEntryBytes = 16 << 10;  // a 4 KiB URI and the rest

bool SafeName(const std::string& job) {
  if (job.empty() || job.size() > 128 || job == "." || job == "..") return false;
  for (char c : job) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

absl::StatusOr<std::string> EntryName(const std::string& job, int32_t attempt, int32_t rank) {
  if (!SafeName(job) || attempt < 0 || rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job id '", job.substr(0, 64), "', attempt ", attempt,
                                                   ", rank ", rank, ": not a rank the registry can name"));
  }
  return absl::StrCat(job, ".", attempt, ".", rank);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankRegistry>> RankRegistry::Open(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus(absl::StrCat("mkdir ", dir));
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open the rank registry ", dir));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "the rank registry ", dir, " must be a folder of uid ", geteuid(), " (this process's) with mode 0700"));
  }
  return std::unique_ptr<RankRegistry>(new RankRegistry(dir, fd));
}

RankRegistry::~RankRegistry() { close(dir_fd_); }

absl::Status RankRegistry::Register(const RankBinding& b) {
  ASSIGN_OR_RETURN(std::string name, EntryName(b.job, b.attempt, b.rank));
  const std::string text = nlohmann::json{{"job", b.job},     {"attempt", b.attempt}, {"rank", b.rank},
                                          {"uid", b.uid},     {"uri", b.uri},         {"keep_last", b.keep_last}}
                               .dump();
  if (text.size() > kMaxEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the registration of ", name, " is over ", kMaxEntryBytes, " bytes"));
  }
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(".", name, ".", getpid(), ".", counter++);
  int fd = openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(absl::StrCat("create ", dir_, "/", tmp));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  close(fd);
  if (!written || renameat(dir_fd_, tmp.c_str(), dir_fd_, name.c_str()) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("register ", name, " in ", dir_), written ? errno : err);
    unlinkat(dir_fd_, tmp.c_str(), 0);
    return s;
  }
  return absl::OkStatus();
}

absl::Status RankRegistry::Clear() {
  int fd = openat(dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open ", dir_));
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return ErrnoStatus(absl::StrCat("list ", dir_));
  }
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  for (const std::string& name : names) {
    if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoStatus(absl::StrCat("remove ", dir_, "/", name));
    }
  }
  return absl::OkStatus();
}

absl::Status RankRegistry::Unregister(const std::string& job, int32_t attempt, int32_t rank) {
  ASSIGN_OR_RETURN(std::string name, EntryName(job, attempt, rank));
  if (unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("unregister ", name, " in ", dir_));
  }
  return absl::OkStatus();
}

absl::StatusOr<RankBinding> RankRegistry::Lookup(const std::string& job, int32_t attempt, int32_t rank) const {
  ASSIGN_OR_RETURN(std::string name, EntryName(job, attempt, rank));
  int fd = openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("job ", job, " attempt ", attempt, " rank ", rank,
                                            " is not registered by this node's agent"));
  }
  if (fd < 0) return ErrnoStatus(absl::StrCat("open ", dir_, "/", name));
  struct stat st {};
  std::string text;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0 &&
            static_cast<uint64_t>(st.st_size) <= kMaxEntryBytes;
  if (ok) {
    text.resize(static_cast<size_t>(st.st_size));
    ok = pread(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  }
  close(fd);
  const absl::Status bad =
      absl::FailedPreconditionError(absl::StrCat("the registration ", dir_, "/", name, " is not a valid entry"));
  if (!ok) return bad;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad;
  RankBinding b;
  try {
    b.job = j.at("job").get<std::string>();
    b.attempt = j.at("attempt").get<int32_t>();
    b.rank = j.at("rank").get<int32_t>();
    b.uid = j.at("uid").get<uid_t>();
    b.uri = j.at("uri").get<std::string>();
    b.keep_last = j.at("keep_last").get<int32_t>();
  } catch (const nlohmann::json::exception&) {
    return bad;
  }
  if (b.job != job || b.attempt != attempt || b.rank != rank) return bad;
  return b;
}

}  // namespace athanor::ckptsvc
