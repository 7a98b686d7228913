// GPU utilisation and memory from nvidia-smi, for idle detection of
// interactive allocations and for the node inventory. Helpers run nvidia-smi
// through RankSupervisor::StartForeign so the agent's reaper leaves it be.
// Thread-safe (no shared state).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// "INDEX, VALUE" lines (csv,noheader,nounits) -> index -> value; lines that
// do not parse are skipped.
std::map<int, double> ParseIndexedCsv(const std::string& csv);

// utilization.gpu (percent) of every visible GPU; nullopt when nvidia-smi is
// missing or fails.
std::optional<std::map<int, double>> SampleGpuUtilization(RankSupervisor* supervisor);

// Any numeric --query-gpu field (e.g. "memory.used", MiB) of every visible GPU.
std::optional<std::map<int, double>> SampleGpuField(RankSupervisor* supervisor, const std::string& field);
// memory.total (MB) of GPU 0, run before any rank exists; 0 when unknown.
int64_t DetectGpuMemoryMb();

}  // namespace athanor::agent
