// The conformance suite every Communicator backend runs.
//
// RunConformance issues every collective over every dtype, op, size and
// placement (in-place / out-of-place) on `comm`, with inputs that are small
// integers, so the exact result is known in any reduction order, and compares
// every element. All ranks must call it with equal options. Returns OK or the
// first mismatch ("all-reduce bf16 sum count=1013 in-place: element 7 is 3,
// want 4"). Blocking; uses only `comm` (not owned).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "collectives/communicator.h"

namespace athanor {

struct ConformanceOptions {
  std::vector<size_t> counts = {0, 1, 1013, 70001};
  // Run once each, f32 sum and bf16 avg only, to keep the suite fast.
  std::vector<size_t> big_counts = {(3u << 20) / 2};
  // Buffers live on the device (nccl); the suite copies through these hooks.
  bool device_memory = false;
};

absl::Status RunConformance(Communicator* comm, const ConformanceOptions& options = {});

// The all-reduce cases of RunConformance alone (every dtype, op, count and
// placement, then the big counts), for an all-reduce engine tested on its own.
absl::Status RunAllReduceConformance(Communicator* comm, const ConformanceOptions& options = {});

// Several all-reduces in flight at once with distinct tags, issued in a
// rank-dependent order and waited in another: results must not mix.
absl::Status RunConcurrentTags(Communicator* comm);

// The value rank `rank` contributes at element `i` (a small integer).
double ConformanceInput(int rank, size_t i);

}  // namespace athanor
