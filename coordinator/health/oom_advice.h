// OOM advice: what to try after an attempt ended out of memory. The agent
// says "out of memory" in a rank's exit message when the kernel's OOM killer
// ended it in its job cgroup (sandbox.h); CUDA's own words
// ("CUDA out of memory", "cudaErrorMemoryAllocation") count where an exit
// message carries them. The rank's log is not read here.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "coordinator/model/types.h"

namespace athanor::coord {

// True when a rank's exit message says it ran out of memory.
bool SaysOutOfMemory(const std::string& message);

// The advice for a job running `command` that ran out of memory: a smaller
// micro-batch with more accumulation steps for the same global batch (with
// the numbers for athanor-train's --micro-batch and --accum), bf16,
// activation checkpointing, quantisation for inference.
std::string OomAdvice(const std::vector<std::string>& command);

// The advice when any rank of the job's current attempt ended out of
// memory, else "".
std::string OomAdviceFor(const JobRecord& job);

}  // namespace athanor::coord
