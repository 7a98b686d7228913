#include "checkpoint/shard_upload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "common/crc32c.h"
#include "common/status.h"

namespace athanor {

absl::StatusOr<SafetensorsLayout> PlanShard(const TrainingState& state, int64_t step, int rank,
                                            int world_size) {
  RETURN_IF_ERROR(ValidateTrainingState(state));
  std::map<std::string, std::string> metadata = state.metadata;
  metadata["step"] = absl::StrCat(step);
  metadata["rank"] = absl::StrCat(rank);
  metadata["world_size"] = absl::StrCat(world_size);
  metadata["format"] = "athanor-v1";
  return PlanSafetensors(state.tensors, metadata);
}

RankManifest PlanManifest(const std::string& job, int64_t step, int rank, int world_size,
                          const SafetensorsLayout& layout, const std::vector<ShardSpec>& specs) {
  RankManifest m;
  m.job = job;
  m.step = step;
  m.rank = rank;
  m.world_size = world_size;
  m.shard_key = ckpt_layout::ShardKey(job, step, rank, world_size);
  m.shard_size = layout.total_size;
  m.metadata = layout.metadata;
  for (size_t i = 0; i < layout.entries.size(); ++i) {
    const SafetensorsEntry& e = layout.entries[i];
    m.tensors.push_back(ManifestTensor{e.name, e.dtype, e.shape, layout.data_start + e.begin,
                                       e.end - e.begin, 0, i < specs.size() ? specs[i] : ShardSpec{}});
  }
  return m;
}

absl::Status UploadStagedShard(ObjectStore* store, const char* base, size_t chunk_bytes,
                               RankManifest* manifest) {
  uint64_t prev_end = 0;
  for (const ManifestTensor& t : manifest->tensors) {
    if (t.offset < prev_end || t.bytes > manifest->shard_size ||
        t.offset > manifest->shard_size - t.bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "' of ", manifest->shard_key,
                       " overlaps another or lies outside the ", manifest->shard_size,
                       "-byte shard"));
    }
    prev_end = t.offset + t.bytes;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<WritableObject> out,
                   store->OpenWrite(manifest->shard_key, PutMode::kOverwrite));
  const size_t chunk = std::max<size_t>(chunk_bytes, 4096);
  uint32_t shard_crc = 0;
  absl::Status status;
  // Bytes outside tensors (the header, padding) count in the shard CRC only.
  auto put_raw = [&](uint64_t begin, uint64_t end) {
    if (end <= begin || !status.ok()) return;
    shard_crc = crc32c::Extend(shard_crc, base + begin, end - begin);
    status = out->Append(absl::string_view(base + begin, end - begin));
  };
  uint64_t pos = 0;
  for (ManifestTensor& t : manifest->tensors) {
    put_raw(pos, t.offset);
    t.crc32c = 0;
    for (uint64_t done = 0; done < t.bytes && status.ok(); done += chunk) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, t.bytes - done));
      const char* p = base + t.offset + done;
      t.crc32c = crc32c::Extend(t.crc32c, p, n);
      status = out->Append(absl::string_view(p, n));
    }
    shard_crc = crc32c::Combine(shard_crc, t.crc32c, t.bytes);
    pos = t.offset + t.bytes;
  }
  put_raw(pos, manifest->shard_size);
  if (!status.ok()) {
    out->Abort();
    return Annotate(status, absl::StrCat("uploading ", manifest->shard_key));
  }
  RETURN_IF_ERROR(Annotate(out->Close(), absl::StrCat("closing ", manifest->shard_key)));
  manifest->shard_crc32c = shard_crc;
  std::string key = ckpt_layout::ManifestKey(manifest->job, manifest->step, manifest->rank);
  return Annotate(store->Put(key, EncodeManifest(*manifest), PutMode::kOverwrite),
                  absl::StrCat("writing ", key));
}

uint32_t ManifestCrc(const RankManifest& manifest) {
  return crc32c::Value(EncodeManifest(manifest));
}

absl::Status WriteCommit(ObjectStore* store, const std::string& job, int64_t step, int world_size,
                         int64_t commit_unix) {
  CommitRecord commit;
  commit.job = job;
  commit.step = step;
  commit.world_size = world_size;
  commit.commit_unix = commit_unix;
  for (int r = 0; r < world_size; ++r) {
    std::string key = ckpt_layout::ManifestKey(job, step, r);
    ASSIGN_OR_RETURN(std::string text, store->Get(key, 0, -1));
    absl::StatusOr<RankManifest> m = DecodeManifest(text);
    if (!m.ok()) return Annotate(m.status(), key);
    if (m->step != step || m->world_size != world_size || m->rank != r) {
      return absl::FailedPreconditionError(absl::StrCat(
          key, " describes step ", m->step, " rank ", m->rank, " of ", m->world_size,
          ", not step ", step, " rank ", r, " of ", world_size));
    }
    commit.shards.push_back(CommitShard{r, m->shard_key, m->shard_size, m->shard_crc32c, key,
                                        crc32c::Value(text.data(), text.size())});
  }
  std::string key = ckpt_layout::CommitKey(job, step);
  absl::Status put = store->Put(key, EncodeCommit(commit), PutMode::kCreateOnly);
  if (!absl::IsAlreadyExists(put)) return Annotate(put, absl::StrCat("writing ", key));
  // Written before (by the other committer, or by this one before a crash):
  // the same commit if it lists the same shards.
  ASSIGN_OR_RETURN(std::string text, store->Get(key, 0, -1));
  absl::StatusOr<CommitRecord> existing = DecodeCommit(text);
  if (!existing.ok()) return Annotate(existing.status(), key);
  bool same = existing->world_size == world_size && existing->shards.size() == commit.shards.size();
  for (size_t i = 0; same && i < commit.shards.size(); ++i) {
    const CommitShard& a = existing->shards[i];
    const CommitShard& b = commit.shards[i];
    same = a.key == b.key && a.size == b.size && a.crc32c == b.crc32c;
  }
  if (!same) {
    return absl::AlreadyExistsError(
        absl::StrCat(key, " exists and lists other shards than this step's manifests"));
  }
  return absl::OkStatus();
}

}  // namespace athanor
