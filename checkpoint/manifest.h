// Per-rank manifests and the COMMIT record (JSON objects in the store).
//
// rank-NNNNN.json describes one shard: its key, size and CRC32C, and for every
// tensor its dtype, local shape, absolute byte range in the shard, CRC32C and
// shard spec (dim0 offset/total), so a restore into a different world size
// can find the rows it needs by name. COMMIT lists every shard (key, size,
// CRC32C) with the world size and the commit time. Pure functions.
#pragma once

#include <cstdint>
#include <map>
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
// DataLoss naming the problem for malformed input.
absl::StatusOr<RankManifest> DecodeManifest(const std::string& text);
std::string EncodeCommit(const CommitRecord& commit);
absl::StatusOr<CommitRecord> DecodeCommit(const std::string& text);

}  // namespace athanor
