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
#include <string>

#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// Start time of `pid` in clock ticks since boot; -1 when it is gone or a zombie.
int64_t ProcessStartTime(pid_t pid);

void RecordRank(const std::string& work_dir, const RankKey& key, pid_t pid);
void ForgetRank(const std::string& work_dir, const RankKey& key);

// Ends the ranks recorded under WORK_DIR/run; returns how many were killed.
int KillOrphanedRanks(const std::string& work_dir);

}  // namespace athanor::agent
