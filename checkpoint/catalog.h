// Catalog: what a job's checkpoints look like in a store. Used by retention,
// restore, the `athanor-ckpt` tool and the `athanor checkpoints` CLI.
//
// A step is committed iff its COMMIT object exists. Functions block on the
// store and are thread-safe as far as the store is.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/object_store.h"

namespace athanor {

struct CommittedStep {
  int64_t step = 0;
  uint64_t total_bytes = 0;   // all shards
  int64_t commit_unix = 0;
  int world_size = 0;
};

// Every object of a job, grouped by step.
struct JobScan {
  std::map<int64_t, std::vector<ObjectInfo>> objects_by_step;
  std::set<int64_t> committed_steps;  // steps with a COMMIT object
};

absl::StatusOr<JobScan> ScanJob(ObjectStore* store, const std::string& job);

// Committed steps of `job`, oldest first, with details read from each COMMIT.
// A COMMIT that cannot be read or parsed is skipped with a warning.
absl::StatusOr<std::vector<CommittedStep>> ListCommitted(ObjectStore* store, const std::string& job);

// Renders ListCommitted's result as a table or as a JSON array.
std::string FormatCommittedTable(const std::vector<CommittedStep>& steps);
std::string FormatCommittedJson(const std::vector<CommittedStep>& steps);

}  // namespace athanor
