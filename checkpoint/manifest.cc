#include "checkpoint/manifest.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {

using nlohmann::json;

namespace {

constexpr char kManifestFormat[] = "athanor-rank-manifest-v1";
constexpr char kCommitFormat[] = "athanor-commit-v1";

std::string Dump(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

// Reads `j[key]` as T, or records an error.
template <typename T>
bool Read(const json& j, const char* key, T* out, std::string* error) {
  if (!j.is_object() || !j.contains(key)) {
    *error = absl::StrCat("missing field '", key, "'");
    return false;
  }
  try {
    *out = j.at(key).get<T>();
  } catch (const json::exception& e) {
    *error = absl::StrCat("field '", key, "': ", e.what());
    return false;
  }
  return true;
}

absl::StatusOr<json> ParseObject(const std::string& text, const char* format) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("not a JSON object");
  if (!j.contains("format") || j["format"] != format) {
    return absl::DataLossError(absl::StrCat("format is not ", format));
  }
  return j;
}

}  // namespace

uint64_t CommitRecord::TotalBytes() const {
  uint64_t total = 0;
  for (const CommitShard& s : shards) total += s.size;
  return total;
}

std::string EncodeManifest(const RankManifest& m) {
  json tensors = json::array();
  for (const ManifestTensor& t : m.tensors) {
    tensors.push_back({{"name", t.name}, {"dtype", DTypeName(t.dtype)}, {"shape", t.shape},
                       {"offset", t.offset}, {"bytes", t.bytes}, {"crc32c", t.crc32c},
                       {"dim0_offset", t.shard.dim0_offset}, {"dim0_total", t.shard.dim0_total}});
  }
  json j = {{"format", kManifestFormat}, {"job", m.job}, {"step", m.step}, {"rank", m.rank},
            {"world_size", m.world_size},
            {"shard", {{"key", m.shard_key}, {"size", m.shard_size}, {"crc32c", m.shard_crc32c}}},
            {"tensors", tensors}, {"metadata", m.metadata}};
  return Dump(j);
}

absl::StatusOr<RankManifest> DecodeManifest(const std::string& text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, kManifestFormat));
  RankManifest m;
  std::string e;
  json shard;
  json tensors;
  if (!Read(j, "job", &m.job, &e) || !Read(j, "step", &m.step, &e) || !Read(j, "rank", &m.rank, &e) ||
      !Read(j, "world_size", &m.world_size, &e) || !Read(j, "shard", &shard, &e) ||
      !Read(shard, "key", &m.shard_key, &e) || !Read(shard, "size", &m.shard_size, &e) ||
      !Read(shard, "crc32c", &m.shard_crc32c, &e) || !Read(j, "tensors", &tensors, &e) ||
      !Read(j, "metadata", &m.metadata, &e)) {
    return absl::DataLossError(absl::StrCat("rank manifest: ", e));
  }
  if (!tensors.is_array()) return absl::DataLossError("rank manifest: tensors is not an array");
  for (const json& t : tensors) {
    ManifestTensor mt;
    std::string dtype;
    if (!Read(t, "name", &mt.name, &e) || !Read(t, "dtype", &dtype, &e) ||
        !Read(t, "shape", &mt.shape, &e) || !Read(t, "offset", &mt.offset, &e) ||
        !Read(t, "bytes", &mt.bytes, &e) || !Read(t, "crc32c", &mt.crc32c, &e) ||
        !Read(t, "dim0_offset", &mt.shard.dim0_offset, &e) ||
        !Read(t, "dim0_total", &mt.shard.dim0_total, &e)) {
      return absl::DataLossError(absl::StrCat("rank manifest tensor: ", e));
    }
    auto parsed = ParseDTypeName(dtype);
    if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
    mt.dtype = *parsed;
    m.tensors.push_back(std::move(mt));
  }
  return m;
}

std::string EncodeCommit(const CommitRecord& c) {
  json shards = json::array();
  for (const CommitShard& s : c.shards) {
    shards.push_back({{"rank", s.rank}, {"key", s.key}, {"size", s.size}, {"crc32c", s.crc32c},
                      {"manifest", s.manifest_key}});
  }
  json j = {{"format", kCommitFormat}, {"job", c.job}, {"step", c.step},
            {"world_size", c.world_size}, {"commit_unix", c.commit_unix},
            {"total_bytes", c.TotalBytes()}, {"shards", shards}};
  return Dump(j);
}

absl::StatusOr<CommitRecord> DecodeCommit(const std::string& text) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, kCommitFormat));
  CommitRecord c;
  std::string e;
  json shards;
  if (!Read(j, "job", &c.job, &e) || !Read(j, "step", &c.step, &e) ||
      !Read(j, "world_size", &c.world_size, &e) || !Read(j, "commit_unix", &c.commit_unix, &e) ||
      !Read(j, "shards", &shards, &e)) {
    return absl::DataLossError(absl::StrCat("COMMIT: ", e));
  }
  if (!shards.is_array()) return absl::DataLossError("COMMIT: shards is not an array");
  for (const json& s : shards) {
    CommitShard cs;
    if (!Read(s, "rank", &cs.rank, &e) || !Read(s, "key", &cs.key, &e) ||
        !Read(s, "size", &cs.size, &e) || !Read(s, "crc32c", &cs.crc32c, &e) ||
        !Read(s, "manifest", &cs.manifest_key, &e)) {
      return absl::DataLossError(absl::StrCat("COMMIT shard: ", e));
    }
    c.shards.push_back(std::move(cs));
  }
  if (static_cast<int>(c.shards.size()) != c.world_size) {
    return absl::DataLossError(absl::StrCat("COMMIT lists ", c.shards.size(), " shards for world size ",
                                            c.world_size));
  }
  return c;
}

}  // namespace athanor
