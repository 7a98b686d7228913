#include "checkpoint/restore.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/catalog.h"
#include "checkpoint/layout.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

struct StepData {
  CommitRecord commit;
  std::vector<RankManifest> manifests;  // by rank
};

absl::Status CheckCrc(const std::string& object, absl::string_view bytes, uint32_t want,
                      const std::string& what) {
  uint32_t got = crc32c::Value(bytes.data(), bytes.size());
  if (got != want) {
    return absl::DataLossError(absl::StrCat(object, ": CRC32C mismatch in ", what, " (got ", got,
                                            ", manifest says ", want, ")"));
  }
  return absl::OkStatus();
}

// Reads COMMIT and manifests and checks shard sizes. DataLoss/NotFound naming
// the bad object.
absl::StatusOr<StepData> LoadStep(ObjectStore* store, const std::string& job, int64_t step) {
  StepData data;
  std::string commit_key = ckpt_layout::CommitKey(job, step);
  ASSIGN_OR_RETURN(std::string text, store->Get(commit_key, 0, -1));
  absl::StatusOr<CommitRecord> commit = DecodeCommit(text);
  if (!commit.ok()) return Annotate(commit.status(), commit_key);
  data.commit = std::move(*commit);
  for (const CommitShard& shard : data.commit.shards) {
    ASSIGN_OR_RETURN(std::string mtext, store->Get(shard.manifest_key, 0, -1));
    if (shard.manifest_crc32c.has_value()) {
      RETURN_IF_ERROR(CheckCrc(shard.manifest_key, mtext, *shard.manifest_crc32c, "the manifest (COMMIT's CRC32C)"));
    }
    absl::StatusOr<RankManifest> m = DecodeManifest(mtext);
    if (!m.ok()) return Annotate(m.status(), shard.manifest_key);
    if (m->shard_key != shard.key || m->shard_size != shard.size || m->shard_crc32c != shard.crc32c ||
        m->rank != shard.rank || m->world_size != data.commit.world_size) {
      return absl::DataLossError(absl::StrCat(shard.manifest_key, " disagrees with ", commit_key));
    }
    ASSIGN_OR_RETURN(ObjectInfo info, store->Head(shard.key));
    if (info.size != shard.size) {
      return absl::DataLossError(absl::StrCat(shard.key, " has ", info.size, " bytes, COMMIT says ",
                                              shard.size));
    }
    data.manifests.push_back(std::move(*m));
  }
  return data;
}

int64_t Rows(const std::vector<int64_t>& shape) { return shape.empty() ? 1 : shape[0]; }

std::vector<int64_t> Tail(const std::vector<int64_t>& shape) {
  return shape.empty() ? shape : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

// A piece of a named tensor held by one source shard.
struct Piece {
  int source_rank;
  const ManifestTensor* tensor;
  int64_t row_begin;  // in the global dim-0 extent
};

// Fills `target` from `step`, reading pieces with ranged gets (cached per
// source tensor so a piece is fetched and checked once).
class Filler {
 public:
  Filler(ObjectStore* store, const StepData& step, int rank) : store_(store), step_(step), rank_(rank) {}

  absl::Status Fill(const TensorRef& target) {
    const int n = static_cast<int>(step_.manifests.size());
    std::vector<Piece> pieces;
    const ManifestTensor* replicated = nullptr;
    for (int k = 0; k < n && replicated == nullptr; ++k) {
      int r = (rank_ + k) % n;  // prefer this rank's natural source
      for (const ManifestTensor& t : step_.manifests[r].tensors) {
        if (t.name != target.name) continue;
        if (t.dtype != target.dtype) {
          return absl::InvalidArgumentError(absl::StrCat("tensor ", target.name, " is ",
                                                         DTypeName(t.dtype), " in the checkpoint, ",
                                                         DTypeName(target.dtype), " in the target"));
        }
        if (!t.shard.sharded()) {
          replicated = &t;
          pieces = {Piece{r, &t, 0}};
        } else {
          pieces.push_back(Piece{r, &t, t.shard.dim0_offset});
        }
      }
    }
    if (pieces.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", target.name, " is not in the checkpoint"));
    }
    const ManifestTensor& first = *pieces.front().tensor;
    int64_t total_rows = replicated ? Rows(first.shape) : first.shard.dim0_total;
    int64_t want_begin = target.shard.sharded() ? target.shard.dim0_offset : 0;
    int64_t want_rows = Rows(target.shape);
    int64_t target_total = target.shard.sharded() ? target.shard.dim0_total : want_rows;
    if (target_total != total_rows || Tail(first.shape) != Tail(target.shape)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", target.name,
                                                     ": target shape does not match the checkpoint"));
    }
    // Every piece must agree with the target on everything but its rows, and
    // sharded pieces must not overlap: the copies below rely on it (each
    // manifest already matches its own bytes to its shape: CheckManifest).
    std::sort(pieces.begin(), pieces.end(),
              [](const Piece& a, const Piece& b) { return a.row_begin < b.row_begin; });
    for (size_t i = 0; i < pieces.size(); ++i) {
      const ManifestTensor& t = *pieces[i].tensor;
      const std::string& object = step_.manifests[pieces[i].source_rank].shard_key;
      if (Tail(t.shape) != Tail(target.shape) || (!replicated && t.shard.dim0_total != total_rows)) {
        return absl::DataLossError(absl::StrCat(object, ": tensor '", target.name,
                                                "' disagrees in shape with its other pieces"));
      }
      if (i > 0 && pieces[i - 1].row_begin + Rows(pieces[i - 1].tensor->shape) > pieces[i].row_begin) {
        return absl::DataLossError(absl::StrCat(object, ": pieces of tensor '", target.name,
                                                "' overlap at row ", pieces[i].row_begin));
      }
    }
    const uint64_t row_bytes = want_rows > 0 ? target.bytes / static_cast<uint64_t>(want_rows) : 0;
    int64_t covered = 0;
    for (const Piece& piece : pieces) {
      int64_t begin = std::max(want_begin, piece.row_begin);
      int64_t end = std::min(want_begin + want_rows, piece.row_begin + Rows(piece.tensor->shape));
      if (begin >= end) continue;
      char* dst = static_cast<char*>(target.data) + (begin - want_begin) * row_bytes;
      if (begin == piece.row_begin && end == piece.row_begin + Rows(piece.tensor->shape)) {
        // The whole piece lands in the target: read it there, no staging copy.
        RETURN_IF_ERROR(ReadDirect(piece, dst));
        covered += end - begin;
        continue;
      }
      ASSIGN_OR_RETURN(const std::string* bytes, Fetch(piece));
      std::memcpy(dst, bytes->data() + (begin - piece.row_begin) * row_bytes, (end - begin) * row_bytes);
      covered += end - begin;
    }
    if (covered != want_rows) {
      return absl::DataLossError(absl::StrCat("tensor ", target.name, ": the shards cover ", covered,
                                              " of the ", want_rows, " rows wanted"));
    }
    return absl::OkStatus();
  }

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // Reads a whole source tensor into `dst` in cache-sized chunks, checking
  // its CRC32C as it goes.
  absl::Status ReadDirect(const Piece& piece, char* dst) {
    const RankManifest& m = step_.manifests[piece.source_rank];
    constexpr uint64_t kChunk = 4 << 20;
    uint32_t crc = 0;
    for (uint64_t pos = 0; pos < piece.tensor->bytes; pos += kChunk) {
      uint64_t n = std::min(kChunk, piece.tensor->bytes - pos);
      RETURN_IF_ERROR(store_->GetInto(m.shard_key, piece.tensor->offset + pos, n, dst + pos));
      crc = crc32c::Extend(crc, dst + pos, n);
    }
    bytes_read_ += piece.tensor->bytes;
    if (crc != piece.tensor->crc32c) {
      return absl::DataLossError(absl::StrCat(m.shard_key, ": CRC32C mismatch in tensor ", piece.tensor->name,
                                              " (got ", crc, ", manifest says ", piece.tensor->crc32c, ")"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const std::string*> Fetch(const Piece& piece) {
    const RankManifest& m = step_.manifests[piece.source_rank];
    std::string id = absl::StrCat(piece.source_rank, "/", piece.tensor->name);
    auto it = cache_.find(id);
    if (it != cache_.end()) return &it->second;
    ASSIGN_OR_RETURN(std::string bytes, store_->Get(m.shard_key, piece.tensor->offset,
                                                    static_cast<int64_t>(piece.tensor->bytes)));
    bytes_read_ += bytes.size();
    RETURN_IF_ERROR(CheckCrc(m.shard_key, bytes, piece.tensor->crc32c,
                             absl::StrCat("tensor ", piece.tensor->name)));
    return &(cache_[id] = std::move(bytes));
  }

  ObjectStore* store_;
  const StepData& step_;
  int rank_;
  std::map<std::string, std::string> cache_;
  uint64_t bytes_read_ = 0;
};

absl::Status VerifyShards(ObjectStore* store, const StepData& data) {
  for (const RankManifest& m : data.manifests) {
    ASSIGN_OR_RETURN(std::string bytes, store->Get(m.shard_key, 0, -1));
    RETURN_IF_ERROR(CheckCrc(m.shard_key, bytes, m.shard_crc32c, "the whole shard"));
    for (const ManifestTensor& t : m.tensors) {
      RETURN_IF_ERROR(CheckCrc(m.shard_key, absl::string_view(bytes).substr(t.offset, t.bytes),
                               t.crc32c, absl::StrCat("tensor ", t.name)));
    }
  }
  return absl::OkStatus();
}

// Tries one step; InvalidArgument is the caller's mistake, anything else
// rejects the step.
absl::Status TryStep(ObjectStore* store, const RestoreOptions& options, int64_t step,
                     const std::vector<TensorRef>& targets, RestoreResult* result) {
  ASSIGN_OR_RETURN(StepData data, LoadStep(store, options.job, step));
  if (options.verify_all_shards) RETURN_IF_ERROR(VerifyShards(store, data));
  Filler filler(store, data, options.rank);
  for (const TensorRef& target : targets) RETURN_IF_ERROR(filler.Fill(target));
  result->step = step;
  result->source_world_size = data.commit.world_size;
  result->metadata = data.manifests[options.rank % data.manifests.size()].metadata;
  result->bytes_read += filler.bytes_read();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RestoreResult> Restore(ObjectStore* store, const RestoreOptions& options,
                                      const std::vector<TensorRef>& targets) {
  TrainingState check{targets, {}};
  RETURN_IF_ERROR(ValidateTrainingState(check));
  ASSIGN_OR_RETURN(JobScan scan, ScanJob(store, options.job));
  RestoreResult result;
  for (auto it = scan.committed_steps.rbegin(); it != scan.committed_steps.rend(); ++it) {
    absl::Status status = TryStep(store, options, *it, targets, &result);
    if (absl::IsInvalidArgument(status)) {
      // The caller's targets do not fit: vote no so peers are not left
      // waiting on this round, then give up.
      if (options.agreement != nullptr) options.agreement->AllDurable(*it, false).IgnoreError();
      return status;
    }
    bool mine = status.ok();
    if (!mine) {
      std::string why = absl::StrCat("step ", *it, ": ", status.message());
      ATHANOR_LOG(WARNING) << "restore of " << options.job << " from " << store->Describe()
                           << " skips " << why << "; trying the previous committed step";
      result.rejected.push_back(why);
    }
    if (options.agreement != nullptr) {
      absl::StatusOr<bool> all = options.agreement->AllDurable(*it, mine);
      if (!all.ok()) return Annotate(all.status(), "restore agreement");
      if (mine && !*all) {
        result.rejected.push_back(absl::StrCat("step ", *it, ": another rank could not load it"));
        continue;
      }
      if (*all) return result;
    } else if (mine) {
      return result;
    }
  }
  return absl::NotFoundError(absl::StrCat("no valid committed checkpoint of job '", options.job,
                                          "' in ", store->Describe(), " (",
                                          scan.committed_steps.size(), " committed steps)"));
}

absl::Status VerifyStep(ObjectStore* store, const std::string& job, int64_t step) {
  ASSIGN_OR_RETURN(StepData data, LoadStep(store, job, step));
  return VerifyShards(store, data);
}

}  // namespace athanor
