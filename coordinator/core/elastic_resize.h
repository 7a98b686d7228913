// The decisions that resize a running elastic job (JobSpec::min_nodes): when
// a lost or taken node shrinks it, when a checkpoint grows it, and what a
// resize threw away. JobLifecycle acts on them (BeginResize).
//
// Pure functions over the records passed in; not thread-safe beyond that.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "coordinator/core/node_table.h"
#include "coordinator/model/types.h"
#include "coordinator/scheduler/scheduler.h"

namespace athanor::coord {

// Whether an elastic job keeps at least its least nodes without `node` (and
// without any DOWN node): then it shrinks rather than stopping for good or
// using a restart. Always false for a fixed gang.
bool ShrinksWithout(const JobRecord& job, const std::string& node, const NodeTable& nodes);

// An attempt already stopping on a failure (not a preemption, a resize or a
// cancel) when `node`, one of its own, goes DOWN: the survivors of a lost
// node usually see it gone first (their collectives fail) while the
// heartbeat timeout still runs, and the attempt cannot settle before the
// DOWN (the lost rank never reports). When it keeps its least nodes, the
// stop becomes the shrink it would have been had the DOWN come first.
bool FailureBecomesShrink(const JobRecord& job, const std::string& node, const NodeTable& nodes);

// SIGTERM -> SIGKILL for the survivors of a lost node: they cannot take a
// checkpoint without its rank, so waiting longer only delays the restart.
inline constexpr std::chrono::milliseconds kLostNodeKillAfter{1000};

// At a committed checkpoint: why a running elastic job below its most grows
// now ("grown at checkpoint step S: ..."), when the scheduler has free nodes
// for it and nothing else waits (Scheduler::GrowableNodes); nullopt otherwise.
std::optional<std::string> GrowthAtCheckpoint(const JobRecord& job, const sched::Scheduler& sched);

// Steps rank 0 reported past the newest committed checkpoint in the current
// attempt: what stopping it now throws away (0 when unknown).
int64_t StepsPastCheckpoint(const JobRecord& job);

}  // namespace athanor::coord
