// Per-rank manifests and the COMMIT record (JSON objects in the store).
//
// rank-NNNNN.json describes one shard: its key, size and CRC32C, and for every
// tensor its dtype, local shape, absolute byte range in the shard, CRC32C and
// shard spec (dim0 offset/total), so a restore into a different world size
// can find the rows it needs by name. COMMIT lists every shard (key, size,
// CRC32C, and its manifest's key and CRC32C) with the world size and the
// commit time. Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/training_state.h"

namespace athanor {

struct ManifestTensor {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset in the shard file
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  ShardSpec shard;
};

struct RankManifest {
  std::string job;
  int64_t step = 0;
  int rank = 0;
  int world_size = 0;
  std::string shard_key;
  uint64_t shard_size = 0;
  uint32_t shard_crc32c = 0;
  std::vector<ManifestTensor> tensors;
  std::map<std::string, std::string> metadata;
};

struct CommitShard {
  int rank = 0;
  std::string key;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  std::string manifest_key;
  // CRC32C of the manifest's bytes, so a manifest is checked before it is
  // trusted. Absent in COMMITs written before it existed.
  std::optional<uint32_t> manifest_crc32c;
};

struct CommitRecord {
  std::string job;
  int64_t step = 0;
  int world_size = 0;
  int64_t commit_unix = 0;
  std::vector<CommitShard> shards;  // by rank
  uint64_t TotalBytes() const;
};

std::string EncodeManifest(const RankManifest& manifest);
// DataLoss naming the problem for malformed input, including a manifest that
// fails CheckManifest.
absl::StatusOr<RankManifest> DecodeManifest(const std::string& text);
// Checks a manifest against itself and its shard's size before anything is
// copied: every tensor's bytes equal product(shape) x dtype size (without
// overflow), its range lies inside the shard, names are unique, and a sharded
// tensor's rows lie inside its dim-0 total. DataLoss naming the tensor.
absl::Status CheckManifest(const RankManifest& manifest);
std::string EncodeCommit(const CommitRecord& commit);
// DataLoss for malformed input, a world size below 1, or shards that are not
// listed once each in rank order.
absl::StatusOr<CommitRecord> DecodeCommit(const std::string& text);

}  // namespace athanor
