#include "worker/agent/orphans.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::agent {
namespace {

std::string RunDir(const std::string& work_dir) { return work_dir + "/run"; }

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

}  // namespace athanor::agent
