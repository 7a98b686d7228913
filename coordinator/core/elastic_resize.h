// The decisions that resize a running elastic job (JobSpec::min_nodes): when
// a lost or taken node shrinks it, when a checkpoint grows it, and what a
// resize threw away. JobLifecycle acts on them (BeginResize).
//
// Pure functions over the records passed in; not thread-safe beyond that.
#pragma once

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

// At a committed checkpoint: why a running elastic job below its most grows
// now ("grown at checkpoint step S: ..."), when the scheduler has free nodes
// for it and nothing else waits (Scheduler::GrowableNodes); nullopt otherwise.
std::optional<std::string> GrowthAtCheckpoint(const JobRecord& job, const sched::Scheduler& sched);

// Steps rank 0 reported past the newest committed checkpoint in the current
// attempt: what stopping it now throws away (0 when unknown).
int64_t StepsPastCheckpoint(const JobRecord& job);

}  // namespace athanor::coord
