// Job cgroups: the memory, pids, CPU and device limits of one job attempt's
// ranks on this node.
//
// CgroupLayout::Detect() finds what the machine offers: cgroup v2 when the
// unified hierarchy at /sys/fs/cgroup (or /sys/fs/cgroup/unified) holds the
// memory and pids controllers, else the v1 hierarchies memory, pids, cpu and
// devices (each mounted at /sys/fs/cgroup/<name>). Every job cgroup is made
// below the agent's own cgroup of each hierarchy (read from
// /proc/self/cgroup), under a directory named for this agent, so two agents
// on one host never share one.
//
// JobCgroup::Create() makes <agent dir>/<job>.<attempt> in every hierarchy
// (a same-named leftover is ended and removed first) and writes the limits,
// on v1 the devices list from scratch ("a" denied, then each rule allowed,
// then devices.list checked against exactly those rules); ProcsFiles() are the files a process writes a pid
// into to join; OomKills() reads the kernel's OOM kill count for the group
// (v2 memory.events, v1 memory.oom_control); Remove() deletes the
// directories once they hold no process.
//
// Device limits: v1's devices controller takes an allow-list. The v2 devices
// controller is a BPF program, which this code does not load: on v2 only the
// mount namespace restricts devices (docs/security.md).
//
// Not thread-safe; the owner serialises calls. Errors name the file and errno.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::agent {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int64_t pids_max = 0;      // 0: none
  double cpus = 0;           // CPU bandwidth in cores; 0: none
  // Character devices the group may open: "c MAJOR:MINOR rwm" lines (v1).
  std::vector<std::string> device_allow;
};

class CgroupLayout {
 public:
  // FailedPrecondition saying why when neither version offers memory and pids.
  // `agent_tag` names this agent's directory ("athanor-<tag>").
  static absl::StatusOr<CgroupLayout> Detect(const std::string& agent_tag);
  bool v2() const { return v2_; }
  // Directories below which job cgroups are made (one per hierarchy).
  const std::vector<std::string>& bases() const { return bases_; }
  std::string Describe() const;

 private:
  bool v2_ = false;
  std::vector<std::string> bases_;  // v2: one; v1: memory, pids, cpu[, devices]
  std::vector<std::string> controllers_;  // the controller of each base (v1)
  friend class JobCgroup;
};

class JobCgroup {
 public:
  static absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const CgroupLayout& layout,
                                                           const std::string& name,
                                                           const CgroupLimits& limits);
  // cgroup.procs of every hierarchy (write a pid to each to join).
  std::vector<std::string> ProcsFiles() const;
  // OOM kills inside the group so far; 0 when unreadable.
  int64_t OomKills() const;
  // Removes the directories (kills nothing; fails quietly while busy).
  void Remove();
  const std::vector<std::string>& dirs() const { return dirs_; }

  // Ends and removes every job cgroup a previous agent left under `layout`
  // (nested ones included, processes SIGKILLed), then resets the bases' v1
  // device rules to the agent's own, so no new box inherits a leftover rule.
  static void RemoveStale(const CgroupLayout& layout);
  // SIGKILLs every process in `dir` and below (cgroup.kill on v2) and removes
  // the directories, deepest first, polling until `timeout`. True when `dir`
  // is gone (or never was). Blocks up to `timeout`.
  static bool RemoveTree(const std::string& dir, std::chrono::milliseconds timeout);

 private:
  JobCgroup(bool v2, std::vector<std::string> dirs, std::vector<std::string> controllers)
      : v2_(v2), dirs_(std::move(dirs)), controllers_(std::move(controllers)) {}
  std::string MemoryDir() const;

  bool v2_;
  std::vector<std::string> dirs_;
  std::vector<std::string> controllers_;
};

}  // namespace athanor::agent
