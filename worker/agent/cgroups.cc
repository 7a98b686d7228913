#include "worker/agent/cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteText(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  if (!out) return ErrnoStatus(absl::StrCat("open ", path));
  out << value;
  out.flush();
  if (!out) return ErrnoStatus(absl::StrCat("write '", value, "' to ", path));
  return absl::OkStatus();
}

// "controller list" -> path of this process's cgroup, from /proc/self/cgroup.
std::vector<std::pair<std::string, std::string>> SelfCgroups() {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view line : absl::StrSplit(ReadText("/proc/self/cgroup"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() == 3) out.emplace_back(f[1], f[2]);
  }
  return out;
}

bool HasWord(const std::string& text, absl::string_view word) {
  for (absl::string_view w : absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (w == word) return true;
  }
  return false;
}

// The named counter ("oom_kill 3") in a flat keyed file.
int64_t KeyedValue(const std::string& path, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(ReadText(path), '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    int64_t v = 0;
    if (kv.first == key && absl::SimpleAtoi(kv.second, &v)) return v;
  }
  return 0;
}

// Enables the controllers in `dir`'s subtree; the agent's own cgroup may hold
// processes (v2 forbids both), so on EBUSY the agent moves into a leaf first.
absl::Status EnableV2Controllers(const std::string& dir, const std::string& leaf) {
  std::string controllers = "+memory +pids";
  if (HasWord(ReadText(dir + "/cgroup.controllers"), "cpu")) controllers += " +cpu";
  if (WriteText(dir + "/cgroup.subtree_control", controllers).ok()) return absl::OkStatus();
  std::error_code ec;
  fs::create_directories(leaf, ec);
  RETURN_IF_ERROR(WriteText(leaf + "/cgroup.procs", std::to_string(getpid())));
  return WriteText(dir + "/cgroup.subtree_control", controllers);
}

// The group's devices.list is exactly `allow`: nothing more was inherited.
absl::Status CheckDeviceList(const std::string& dir, const std::vector<std::string>& allow) {
  std::set<std::string> want(allow.begin(), allow.end());
  std::set<std::string> have;
  for (absl::string_view line : absl::StrSplit(ReadText(dir + "/devices.list"), '\n', absl::SkipEmpty())) {
    have.emplace(line);
  }
  if (have == want) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(dir, "/devices.list is '", absl::StrJoin(have, "; "), "', not '",
                                          absl::StrJoin(want, "; "), "'"));
}

}  // namespace

absl::StatusOr<CgroupLayout> CgroupLayout::Detect(const std::string& agent_tag) {
  const std::string name = "athanor-" + agent_tag;
  std::vector<std::pair<std::string, std::string>> self = SelfCgroups();
  for (const std::string& mount : {std::string("/sys/fs/cgroup"), std::string("/sys/fs/cgroup/unified")}) {
    std::string controllers = ReadText(mount + "/cgroup.controllers");
    if (!HasWord(controllers, "memory") || !HasWord(controllers, "pids")) continue;
    std::string own;
    for (const auto& [c, path] : self) {
      if (c.empty()) own = path;
    }
    std::string parent = mount + (own == "/" ? "" : own);
    CgroupLayout layout;
    layout.v2_ = true;
    layout.bases_ = {parent + "/" + name};
    RETURN_IF_ERROR(EnableV2Controllers(parent, parent + "/" + name + "-agent"));
    std::error_code ec;
    fs::create_directories(layout.bases_[0], ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", layout.bases_[0], ": ", ec.message()));
    RETURN_IF_ERROR(EnableV2Controllers(layout.bases_[0], layout.bases_[0] + "-agent"));
    return layout;
  }
  CgroupLayout layout;
  std::vector<std::string> missing;
  for (const char* controller : {"memory", "pids", "cpu", "devices"}) {
    std::string own;
    bool found = false;
    for (const auto& [c, path] : self) {
      for (absl::string_view one : absl::StrSplit(c, ',')) {
        if (one == controller) {
          own = path;
          found = true;
        }
      }
    }
    std::string mount = absl::StrCat("/sys/fs/cgroup/", controller);
    if (!found || !fs::exists(mount + "/cgroup.procs")) {
      missing.push_back(controller);
      continue;
    }
    std::string base = mount + (own == "/" ? "" : own) + "/" + name;
    std::error_code ec;
    fs::create_directories(base, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", base, ": ", ec.message()));
    layout.bases_.push_back(base);
    layout.controllers_.push_back(controller);
  }
  for (const std::string& m : missing) {
    if (m == "memory" || m == "pids") {
      return absl::FailedPreconditionError(absl::StrCat(
          "no cgroup offers memory and pids limits (cgroup v2 at /sys/fs/cgroup lacks them and v1 lacks: ",
          absl::StrJoin(missing, ", "), ")"));
    }
  }
  return layout;
}

std::string CgroupLayout::Describe() const {
  if (v2_) return "cgroup v2 at " + bases_[0];
  return absl::StrCat("cgroup v1 (", absl::StrJoin(controllers_, ", "), ")");
}

absl::StatusOr<std::unique_ptr<JobCgroup>> JobCgroup::Create(const CgroupLayout& layout,
                                                             const std::string& name,
                                                             const CgroupLimits& limits) {
  std::vector<std::string> dirs;
  for (const std::string& base : layout.bases_) dirs.push_back(base + "/" + name);
  std::unique_ptr<JobCgroup> group(new JobCgroup(layout.v2_, dirs, layout.controllers_));
  for (const std::string& dir : dirs) {
    if (mkdir(dir.c_str(), 0755) == 0) continue;
    // A leftover of the same name: its rules and processes are not this box's.
    if (errno != EEXIST || !RemoveTree(dir, std::chrono::seconds(5)) || mkdir(dir.c_str(), 0755) != 0) {
      return ErrnoStatus("mkdir " + dir);
    }
  }
  auto fail = [&](absl::Status s) {
    group->Remove();
    return s;
  };
  const int64_t period = 100000;
  int64_t quota = limits.cpus > 0 ? std::max<int64_t>(1000, std::llround(limits.cpus * period)) : -1;
  if (layout.v2_) {
    const std::string& d = dirs[0];
    absl::Status s;
    if (limits.memory_bytes > 0) {
      s.Update(WriteText(d + "/memory.max", std::to_string(limits.memory_bytes)));
      if (fs::exists(d + "/memory.swap.max")) s.Update(WriteText(d + "/memory.swap.max", "0"));
      s.Update(WriteText(d + "/memory.oom.group", "1"));
    }
    if (limits.pids_max > 0) s.Update(WriteText(d + "/pids.max", std::to_string(limits.pids_max)));
    if (quota > 0 && fs::exists(d + "/cpu.max")) {
      s.Update(WriteText(d + "/cpu.max", absl::StrCat(quota, " ", period)));
    }
    if (!s.ok()) return fail(s);
    return group;
  }
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& d = dirs[i];
    const std::string& c = layout.controllers_[i];
    absl::Status s;
    if (c == "memory" && limits.memory_bytes > 0) {
      s = WriteText(d + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
      if (s.ok() && fs::exists(d + "/memory.memsw.limit_in_bytes")) {
        s = WriteText(d + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
      }
    } else if (c == "pids" && limits.pids_max > 0) {
      s = WriteText(d + "/pids.max", std::to_string(limits.pids_max));
    } else if (c == "cpu" && quota > 0) {
      s = WriteText(d + "/cpu.cfs_period_us", std::to_string(period));
      if (s.ok()) s = WriteText(d + "/cpu.cfs_quota_us", std::to_string(quota));
    } else if (c == "devices") {
      s = WriteText(d + "/devices.deny", "a");
      for (const std::string& allow : limits.device_allow) {
        if (s.ok()) s = WriteText(d + "/devices.allow", allow);
      }
      if (s.ok()) s = CheckDeviceList(d, limits.device_allow);
    }
    if (!s.ok()) return fail(s);
  }
  return group;
}

std::vector<std::string> JobCgroup::ProcsFiles() const {
  std::vector<std::string> out;
  for (const std::string& d : dirs_) out.push_back(d + "/cgroup.procs");
  return out;
}

std::string JobCgroup::MemoryDir() const {
  if (v2_) return dirs_[0];
  for (size_t i = 0; i < dirs_.size(); ++i) {
    if (controllers_[i] == "memory") return dirs_[i];
  }
  return "";
}

int64_t JobCgroup::OomKills() const {
  std::string dir = MemoryDir();
  if (dir.empty()) return 0;
  return v2_ ? KeyedValue(dir + "/memory.events", "oom_kill")
             : KeyedValue(dir + "/memory.oom_control", "oom_kill");
}

void JobCgroup::Remove() {
  for (const std::string& d : dirs_) rmdir(d.c_str());  // EBUSY while a process lingers
}

bool JobCgroup::RemoveTree(const std::string& dir, std::chrono::milliseconds timeout) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return true;
  std::vector<std::string> dirs = {dir};  // parents before children
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (const std::string& d : dirs) {
      // v2 only; ignored: a group whose processes just went may refuse, and
      // the cgroup.procs loop below kills whatever is left all the same.
      if (fs::exists(d + "/cgroup.kill", ec)) WriteText(d + "/cgroup.kill", "1").IgnoreError();
      for (absl::string_view line : absl::StrSplit(ReadText(d + "/cgroup.procs"), '\n', absl::SkipEmpty())) {
        pid_t pid = 0;
        if (absl::SimpleAtoi(line, &pid) && pid > 1 && pid != getpid()) kill(pid, SIGKILL);
      }
    }
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) rmdir(it->c_str());  // EBUSY until they are gone
    if (!fs::exists(dir, ec)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Killed processes leave their cgroup as they exit; no event says when.
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); /* sleep override */
  }
}

void JobCgroup::RemoveStale(const CgroupLayout& layout) {
  for (size_t i = 0; i < layout.bases_.size(); ++i) {
    const std::string& base = layout.bases_[i];
    std::error_code ec;
    std::vector<std::string> children;
    for (const auto& entry : fs::directory_iterator(base, ec)) {
      if (entry.is_directory(ec) && !entry.is_symlink(ec)) children.push_back(entry.path().string());
    }
    for (const std::string& child : children) {
      if (!RemoveTree(child, std::chrono::seconds(5))) {
        ATHANOR_LOG(WARNING) << "cannot remove " << child << ", left by a previous agent: it still holds processes";
      }
    }
    if (!layout.v2_ && layout.controllers_[i] == "devices") {
      // The agent's own rules, not whatever a leftover base was given; a job
      // cgroup's allow-list fails loudly where the agent's cgroup forbids a device.
      absl::Status s = WriteText(base + "/devices.allow", "a");
      if (!s.ok()) ATHANOR_LOG(WARNING) << "cannot reset the device rules of " << base << ": " << s;
    }
  }
}

}  // namespace athanor::agent
