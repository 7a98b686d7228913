// UcxTuningFromEnv: the ATHANOR_UCX_* experiment knobs, read once, at the
// edge. Mains call it (with ProcessEnv(), or their own lookup) and put the result
// in CommunicatorOptions::ucx; library code never calls it.
//
// Every variable is optional; one that is set must parse and lie in its
// range, else the whole read fails with InvalidArgument naming the variable,
// its value and what it accepts (never a silent zero). Sizes are whole
// numbers of bytes, optionally with a K, M or G suffix (powers of 1024);
// switches are 0 or 1. The variables and their ranges: ucx_tuning_env.cc.
#pragma once

#include "absl/status/statusor.h"
#include "collectives/ucx/ucx_tuning.h"
#include "common/rank_env.h"

namespace athanor {

// `base` with every ATHANOR_UCX_* variable that `lookup` (ProcessEnv() in a
// main, common/rank_env.h) finds applied.
absl::StatusOr<UcxTuning> UcxTuningFromEnv(const EnvLookup& lookup, UcxTuning base = {});

}  // namespace athanor
