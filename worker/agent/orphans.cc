#include "worker/agent/orphans.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"
#include "worker/agent/cgroups.h"

namespace athanor::agent {
namespace {

std::string RunDir(const std::string& work_dir) { return work_dir + "/run"; }

// Bounds on a registry record (written by agents as root, read all the same
// as outside input).
constexpr size_t kMaxRecordBytes = 64 << 10;
constexpr size_t kMaxRecordLines = 64;
constexpr auto kReapTimeout = std::chrono::seconds(5);

bool ValidTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 64) return false;
  for (char c : tag) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// A recorded cgroup directory of `tag`: under /sys/fs/cgroup, no "." or ".."
// component, named athanor-<tag>.
bool RecordedDirOk(absl::string_view dir, const std::string& tag) {
  if (!absl::StartsWith(dir, "/sys/fs/cgroup/")) return false;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (part == "." || part == "..") return false;
  }
  return absl::EndsWith(dir, "/athanor-" + tag);
}

// The record's directories ({} when missing, too big or malformed).
std::vector<std::string> ReadRecord(const std::string& path, const std::string& tag) {
  std::vector<std::string> dirs;
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return dirs;
  struct stat st;
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && st.st_size >= 0 &&
      static_cast<uint64_t>(st.st_size) <= kMaxRecordBytes) {
    text.resize(static_cast<size_t>(st.st_size));
    ssize_t n = read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (dirs.size() == kMaxRecordLines) break;
    if (RecordedDirOk(line, tag)) {
      dirs.emplace_back(line);
    } else {
      ATHANOR_LOG(WARNING) << path << ": ignoring '" << line.substr(0, 200) << "' (not a cgroup of agent " << tag << ")";
    }
  }
  return dirs;
}

std::string RecordPath(const std::string& work_dir, const RankKey& key) {
  return absl::StrCat(RunDir(work_dir), "/", key.job_id, ".", key.attempt, ".", key.rank, ".pid");
}

}  // namespace

int64_t ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');  // the command name may hold spaces and ')'
  if (paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(paren + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string f; rest >> f;) fields.push_back(f);
  if (fields.size() < 20 || fields[0] == "Z" || fields[0] == "X") return -1;
  int64_t start = -1;
  if (!absl::SimpleAtoi(fields[19], &start)) return -1;  // field 22: starttime
  return start;
}

void RecordRank(const std::string& work_dir, const RankKey& key, pid_t pid) {
  std::error_code ec;
  std::filesystem::create_directories(RunDir(work_dir), ec);
  std::string path = RecordPath(work_dir, key);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << pid << " " << ProcessStartTime(pid) << " " << key.job_id << " " << key.attempt << " "
        << key.rank << "\n";
    if (!out.flush()) {
      ATHANOR_LOG(WARNING) << "cannot write " << tmp;
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) ATHANOR_LOG(WARNING) << "cannot write " << path << ": " << ec.message();
}

void ForgetRank(const std::string& work_dir, const RankKey& key) {
  std::error_code ec;
  std::filesystem::remove(RecordPath(work_dir, key), ec);
}

int KillOrphanedRanks(const std::string& work_dir) {
  int killed = 0;
  std::error_code ec;
  std::vector<std::filesystem::path> records;
  for (const auto& entry : std::filesystem::directory_iterator(RunDir(work_dir), ec)) {
    records.push_back(entry.path());
  }
  for (const std::filesystem::path& path : records) {
    std::ifstream in(path);
    pid_t pid = 0;
    int64_t start = -1;
    RankKey key;
    bool parsed = static_cast<bool>(in >> pid >> start >> key.job_id >> key.attempt >> key.rank);
    if (parsed && pid > 1 && start >= 0 && ProcessStartTime(pid) == start) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);  // in case it left its group
      // Not our child: no event tells us it is gone, so poll, bounded.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (ProcessStartTime(pid) == start && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5)); /* sleep override */
      }
      ++killed;
      if (key.rank < 0) {  // a sandbox's PID namespace (sandbox.h)
        ATHANOR_LOG(WARNING) << "killed the orphaned sandbox of job " << key.job_id << " attempt "
                             << key.attempt << " (pid " << pid << ") left by a previous agent";
      } else {
        ATHANOR_LOG(WARNING) << "killed orphaned rank job " << key.job_id << " attempt "
                             << key.attempt << " rank " << key.rank << " (pid " << pid
                             << ") left by a previous agent";
      }
    }
    std::filesystem::remove(path, ec);
  }
  return killed;
}

absl::StatusOr<std::unique_ptr<AgentRegistry>> AgentRegistry::Claim(const std::string& dir, const std::string& tag) {
  if (!ValidTag(tag)) return absl::InvalidArgumentError(absl::StrCat("agent tag '", tag, "': letters, digits, '_', '-'"));
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir);
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " (the agents' registry) is not a folder of root's that only root may write"));
  }
  std::string lock = absl::StrCat(dir, "/", tag, ".lock");
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("open " + lock);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    absl::Status s = errno == EWOULDBLOCK
                         ? absl::FailedPreconditionError(absl::StrCat(
                               "another agent with this node name and work dir runs on this host (it holds ",
                               lock, ")"))
                         : ErrnoStatus("flock " + lock);
    close(fd);
    return s;
  }
  return std::unique_ptr<AgentRegistry>(new AgentRegistry(dir, tag, fd));
}

AgentRegistry::~AgentRegistry() {
  bool all_gone = true;
  for (const std::string& d : recorded_) {
    std::error_code ec;
    if (std::filesystem::exists(d, ec)) all_gone = false;
  }
  if (all_gone) {
    unlink(absl::StrCat(dir_, "/", tag_, ".cgroups").c_str());
    unlink(absl::StrCat(dir_, "/", tag_, ".lock").c_str());  // while still holding it
  }
  close(lock_fd_);
}

bool AgentRegistry::ReapOne(const std::string& tag) {
  bool clean = true;
  for (const std::string& base : ReadRecord(absl::StrCat(dir_, "/", tag, ".cgroups"), tag)) {
    for (const std::string& d : {base, base + "-agent"}) {  // -agent: the v2 leaf it moved into
      if (!JobCgroup::RemoveTree(d, kReapTimeout)) {
        ATHANOR_LOG(WARNING) << "cannot remove " << d << ", left by a killed agent: it still holds processes";
        clean = false;
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove_all("/dev/shm/athanor-" + tag, ec);
  return clean;
}

int AgentRegistry::Reap() {
  int reaped = 0;
  std::vector<std::string> tags;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".lock")) tags.push_back(name.substr(0, name.size() - 5));
  }
  for (const std::string& tag : tags) {
    if (!ValidTag(tag)) continue;
    std::string lock = absl::StrCat(dir_, "/", tag, ".lock");
    int fd = -1;
    if (tag != tag_) {  // this tag's lock is ours: its record is our predecessor's
      fd = open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) continue;
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // a live agent's
        close(fd);
        continue;
      }
    }
    bool had_record = std::filesystem::exists(absl::StrCat(dir_, "/", tag, ".cgroups"), ec);
    if (ReapOne(tag) && tag != tag_) {
      unlink(absl::StrCat(dir_, "/", tag, ".cgroups").c_str());
      unlink(lock.c_str());
    }
    if (had_record) {
      ++reaped;
      ATHANOR_LOG(INFO) << "removed the cgroups and processes left by the killed agent " << tag;
    }
    if (fd >= 0) close(fd);
  }
  return reaped;
}

absl::Status AgentRegistry::Record(const std::vector<std::string>& cgroup_dirs) {
  for (const std::string& d : cgroup_dirs) {
    if (!RecordedDirOk(d, tag_)) return absl::InternalError(absl::StrCat("cannot record cgroup ", d));
  }
  std::string path = absl::StrCat(dir_, "/", tag_, ".cgroups");
  std::vector<std::string> dirs = cgroup_dirs;
  for (const std::string& old : ReadRecord(path, tag_)) {  // what Reap could not remove stays listed
    std::error_code ec;
    if (std::find(dirs.begin(), dirs.end(), old) == dirs.end() && std::filesystem::exists(old, ec)) {
      dirs.push_back(old);
    }
  }
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + tmp);
  std::string text = absl::StrJoin(dirs, "\n") + "\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  absl::Status s = ok ? absl::OkStatus() : ErrnoStatus("write " + tmp);
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus("rename " + tmp);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  recorded_ = std::move(dirs);
  return absl::OkStatus();
}

}  // namespace athanor::agent
