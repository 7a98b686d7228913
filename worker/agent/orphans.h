// Orphaned ranks: rank processes a previous agent incarnation left behind.
//
// Contract: while a rank runs, the agent keeps a record of it in
// WORK_DIR/run/<job>.<attempt>.<rank>.pid holding "pid starttime job attempt
// rank": the pid (also its process group id, ranks lead their own group) and
// the process's start time (field 22 of /proc/<pid>/stat), so a reused pid is
// never mistaken for the rank. RecordRank() writes it (atomically, via rename)
// right after the rank starts; ForgetRank() removes it once the rank is
// reaped. A SIGKILLed agent leaves its records behind; on start-up, before it
// registers, the agent calls KillOrphanedRanks(), which SIGKILLs the process
// group of every recorded rank that still runs with the recorded start time,
// waits (bounded) until it is gone, logs it and removes every record.
// A rank started in the instant between fork and RecordRank() is not covered.
//
// Stateless free functions, safe from any thread; errors are logged, never
// thrown (a missing or unreadable record just means nothing to end).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// Start time of `pid` in clock ticks since boot; -1 when it is gone or a zombie.
int64_t ProcessStartTime(pid_t pid);

void RecordRank(const std::string& work_dir, const RankKey& key, pid_t pid);
void ForgetRank(const std::string& work_dir, const RankKey& key);

// Ends the ranks recorded under WORK_DIR/run; returns how many were killed.
int KillOrphanedRanks(const std::string& work_dir);

// AgentRegistry: what every sandboxing agent on this host left, so that a
// restarted agent starts from a clean slate even after kill -9.
//
// A root-only folder (by default /run/athanor/agents, which lasts as long as
// the boot, as cgroups do) holds for each agent tag (sandbox.h: node name and
// a hash of the work dir) <tag>.lock, which the agent holds locked (flock)
// for its whole life, and <tag>.cgroups, the cgroup directories it made, one
// a line. The kernel drops the lock however the agent ends, so a lock that
// can be taken is a dead agent's. Reap() ends what each dead agent left, this
// tag's previous incarnation included and whatever cgroup it ran in (its own
// cgroup path may differ now): it SIGKILLs every process in those cgroups
// (ranks and anything they started; the box holders then end themselves),
// removes the cgroups, deepest first, and its /dev/shm/athanor-<tag> folder,
// then its files. Agents of builds older than this registry left no record;
// only a restart with their tag (JobCgroup::RemoveStale) cleans up after them.
//
// Thread model: one owner thread (Sandbox::Create, then ~Sandbox). Reap()
// logs each leftover it cannot remove, once, and carries on.
class AgentRegistry {
 public:
  // Takes `tag`'s lock in `dir` (made 0700 when missing). FailedPrecondition
  // when `dir` is not root's alone or a live agent holds the tag (two agents
  // with one node name and work dir).
  static absl::StatusOr<std::unique_ptr<AgentRegistry>> Claim(const std::string& dir, const std::string& tag);
  // Forgets this agent's record when every cgroup in it is gone (a box that
  // outlived the agent stays listed for the next one), and unlocks.
  ~AgentRegistry();
  AgentRegistry(const AgentRegistry&) = delete;
  AgentRegistry& operator=(const AgentRegistry&) = delete;

  // Ends and removes dead agents' leftovers; returns how many agents' records it cleared.
  int Reap();
  // Lists `cgroup_dirs` as this agent's (replacing the previous incarnation's record).
  absl::Status Record(const std::vector<std::string>& cgroup_dirs);

 private:
  AgentRegistry(std::string dir, std::string tag, int lock_fd)
      : dir_(std::move(dir)), tag_(std::move(tag)), lock_fd_(lock_fd) {}
  // Removes what the record of `tag` lists; true when all of it is gone.
  bool ReapOne(const std::string& tag);

  const std::string dir_;
  const std::string tag_;
  const int lock_fd_;
  std::vector<std::string> recorded_;
};

}  // namespace athanor::agent
