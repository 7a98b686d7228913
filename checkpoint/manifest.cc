#include "checkpoint/manifest.h"

#include <limits>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor {

using nlohmann::json;

namespace {

constexpr char kManifestFormat[] = "athanor-rank-manifest-v1";
constexpr char kCommitFormat[] = "athanor-commit-v1";

std::string Dump(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

// Reads `j[key]` as T, or records an error. Integers must be JSON integers
// within T's range: nlohmann would otherwise convert 1e300 or 2^40 silently
// (a float-to-int conversion out of range is undefined behaviour).
template <typename T>
bool Read(const json& j, const char* key, T* out, std::string* error) {
  if (!j.is_object() || !j.contains(key)) {
    *error = absl::StrCat("missing field '", key, "'");
    return false;
  }
  const json& v = j.at(key);
  if constexpr (std::is_integral_v<T>) {
    bool fits = false;
    if (v.is_number_unsigned()) {
      fits = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    } else if (v.is_number_integer()) {
      const int64_t n = v.get<int64_t>();
      fits = std::is_signed_v<T> ? n >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                       n <= static_cast<int64_t>(std::numeric_limits<T>::max())
                                 : n >= 0;
    }
    if (!fits) {
      *error = absl::StrCat("field '", key, "' is not an integer in range: ", v.dump().substr(0, 40));
      return false;
    }
    *out = v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
    return true;
  } else {
    try {
      *out = v.get<T>();
    } catch (const json::exception& e) {
      *error = absl::StrCat("field '", key, "': ", e.what());
      return false;
    }
    return true;
  }
}

// Reads an array of int64 (a shape).
bool ReadShape(const json& j, const char* key, std::vector<int64_t>* out, std::string* error) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array()) {
    *error = absl::StrCat("field '", key, "' is missing or not an array");
    return false;
  }
  out->clear();
  for (const json& d : j.at(key)) {
    json holder = {{"dim", d}};
    int64_t dim = 0;
    if (!Read(holder, "dim", &dim, error)) return false;
    out->push_back(dim);
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
        !ReadShape(t, "shape", &mt.shape, &e) || !Read(t, "offset", &mt.offset, &e) ||
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
  RETURN_IF_ERROR(CheckManifest(m));
  return m;
}

absl::Status CheckManifest(const RankManifest& m) {
  if (m.world_size < 1 || m.rank < 0 || m.rank >= m.world_size) {
    return absl::DataLossError(absl::StrCat("rank manifest: rank ", m.rank, " of world size ",
                                            m.world_size, " is out of range"));
  }
  std::set<std::string> names;
  for (const ManifestTensor& t : m.tensors) {
    auto bad = [&](absl::string_view why) {
      return absl::DataLossError(absl::StrCat("rank manifest: tensor '", t.name, "' ", why));
    };
    if (t.name.empty() || !names.insert(t.name).second) return bad("is unnamed or named twice");
    // bytes == product(shape) * dtype size, without overflow.
    uint64_t expected = DTypeSize(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) return bad("has a negative dimension");
      if (d != 0 && expected > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) {
        return bad("has more elements than fit in 64 bits");
      }
      expected *= static_cast<uint64_t>(d);
    }
    if (t.bytes != expected) {
      return bad(absl::StrCat("says ", t.bytes, " bytes but its shape and dtype make ", expected));
    }
    if (t.offset > m.shard_size || t.bytes > m.shard_size - t.offset) {
      return bad(absl::StrCat("range [", t.offset, ", +", t.bytes, ") runs past the end of the shard (",
                              m.shard_size, " bytes)"));
    }
    if (t.shard.sharded()) {
      const int64_t rows = t.shape.empty() ? -1 : t.shape[0];
      if (rows < 0 || t.shard.dim0_offset < 0 || t.shard.dim0_offset > t.shard.dim0_total ||
          rows > t.shard.dim0_total - t.shard.dim0_offset) {
        return bad(absl::StrCat("rows [", t.shard.dim0_offset, ", +", rows, ") do not fit its ",
                                t.shard.dim0_total, " total rows"));
      }
    }
  }
  return absl::OkStatus();
}

std::string EncodeCommit(const CommitRecord& c) {
  json shards = json::array();
  for (const CommitShard& s : c.shards) {
    json shard = {{"rank", s.rank}, {"key", s.key}, {"size", s.size}, {"crc32c", s.crc32c},
                  {"manifest", s.manifest_key}};
    if (s.manifest_crc32c.has_value()) shard["manifest_crc32c"] = *s.manifest_crc32c;
    shards.push_back(std::move(shard));
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
    if (s.is_object() && s.contains("manifest_crc32c")) {
      uint32_t crc = 0;
      if (!Read(s, "manifest_crc32c", &crc, &e)) return absl::DataLossError(absl::StrCat("COMMIT shard: ", e));
      cs.manifest_crc32c = crc;
    }
    c.shards.push_back(std::move(cs));
  }
  if (c.world_size < 1 || static_cast<int64_t>(c.shards.size()) != c.world_size) {
    return absl::DataLossError(absl::StrCat("COMMIT lists ", c.shards.size(), " shards for world size ",
                                            c.world_size));
  }
  for (size_t r = 0; r < c.shards.size(); ++r) {
    if (c.shards[r].rank != static_cast<int>(r)) {
      return absl::DataLossError(absl::StrCat("COMMIT lists rank ", c.shards[r].rank, " in place ", r));
    }
  }
  return c;
}

}  // namespace athanor
