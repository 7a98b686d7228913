// The pieces of a checkpoint that both uploaders share: the in-rank
// Checkpointer and the node checkpoint service (checkpoint/service/). Both
// produce byte-identical shards, manifests and COMMITs through these.
//
//  - PlanShard: the safetensors layout of one rank's state at `step`, with
//    the metadata every shard carries (step, rank, world size, format).
//  - PlanManifest: the rank manifest of a staged shard, CRCs still zero.
//  - UploadStagedShard: streams a staged shard (the whole file image in
//    memory) to the store, filling in every tensor's and the shard's CRC32C,
//    then writes the manifest. The shard is durable when it returns OK.
//  - WriteCommit: reads every rank's manifest back and writes COMMIT as a
//    create-only put. Idempotent: OK when a COMMIT listing the same shards is
//    already there (a retry after a crash); AlreadyExists when one lists others.
//
// Pure functions over the store; thread-safe as the store is. Block on I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/manifest.h"
#include "checkpoint/object_store.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/training_state.h"

namespace athanor {

absl::StatusOr<SafetensorsLayout> PlanShard(const TrainingState& state, int64_t step, int rank,
                                            int world_size);

RankManifest PlanManifest(const std::string& job, int64_t step, int rank, int world_size,
                          const SafetensorsLayout& layout, const std::vector<ShardSpec>& specs);

// `base` holds manifest->shard_size bytes: the whole shard. Tensors must lie
// inside it, sorted by offset and not overlapping (CheckManifest + order).
// `chunk_bytes` is the CRC + Append granularity.
absl::Status UploadStagedShard(ObjectStore* store, const char* base, size_t chunk_bytes,
                               RankManifest* manifest);

// The CRC32C of the manifest bytes UploadStagedShard wrote for `manifest`.
uint32_t ManifestCrc(const RankManifest& manifest);

absl::Status WriteCommit(ObjectStore* store, const std::string& job, int64_t step, int world_size,
                         int64_t commit_unix);

}  // namespace athanor
