// CPU time of a process group, read from /proc (Linux), for measuring
// whether an interactive allocation is in use. Pure reads; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

namespace athanor::agent {

// Sum of utime+stime+cutime+cstime (seconds) over every live process whose
// process group is `pgid`; -1 when none is found.
double ProcessGroupCpuSeconds(pid_t pgid, const std::string& proc_root = "/proc");

// Parses one /proc/<pid>/stat line: its process group and CPU seconds
// (utime+stime+cutime+cstime at `ticks_per_second`). False when malformed.
bool ParseProcStat(const std::string& line, long ticks_per_second, pid_t* pgid, double* cpu_s);

}  // namespace athanor::agent
