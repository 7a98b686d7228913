// CheckpointService: the stage and hand-off requests and the upload itself.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "checkpoint/service/checkpoint_service.h"
#include "checkpoint/service/service_area.h"
#include "checkpoint/service/stage_request.h"
#include "checkpoint/service/throttled_store.h"
#include "checkpoint/service/wire.h"
#include "checkpoint/shard_upload.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::ckptsvc {
namespace {

nlohmann::json ErrorReply(const absl::Status& s) {
  return {{"ok", false}, {"error", s.ToString()}};
}

}  // namespace

absl::Status CheckpointService::HandleStage(Connection* conn, const nlohmann::json& msg) {
  absl::StatusOr<StageRequest> req = ParseStageRequest(msg, options_.budget_bytes);
  if (!req.ok()) return SendFrame(conn->fd, ErrorReply(req.status()));
  const std::string key = absl::StrCat(req->job, "/", req->rank);
  std::thread finished_uploader;
  int fd = -1;
  uint64_t area_id = 0, capacity = 0;
  std::string skip;
  {
    absl::MutexLock lock(&mu_);
    if (conn->area != nullptr && conn->area->key != key) {
      return SendFrame(conn->fd, ErrorReply(absl::FailedPreconditionError(absl::StrCat(
                                     "this connection stages for ", conn->area->key, ", not ", key))));
    }
    std::unique_ptr<Area>& slot = areas_[key];
    if (slot == nullptr) {
      slot = std::make_unique<Area>();
      slot->id = next_area_id_++;
      slot->key = key;
      slot->job = req->job;
      slot->rank = req->rank;
      slot->uid = conn->uid;
      slot->path = absl::StrCat(options_.staging_dir, "/", req->job, ".", req->rank, ".", slot->id,
                                ".area");
    }
    Area* area = slot.get();
    if (area->uid != conn->uid) {
      return SendFrame(conn->fd, ErrorReply(absl::PermissionDeniedError(absl::StrCat(
                                     "rank ", req->rank, " of ", req->job,
                                     " stages from another uid"))));
    }
    if (area->owner != nullptr && area->owner != conn) {
      return SendFrame(conn->fd, ErrorReply(absl::AlreadyExistsError(absl::StrCat(
                                     "rank ", req->rank, " of ", req->job,
                                     " is already connected to the checkpoint service"))));
    }
    area->owner = conn;
    conn->area = area;
    for (;;) {
      if (stopping_) return absl::CancelledError("the checkpoint service is stopping");
      const uint64_t grow = req->bytes > area->capacity ? req->bytes - area->capacity : 0;
      if (area->uploading) {
        skip = "the previous checkpoint of this rank is still uploading";
      } else if (used_bytes_ + grow > options_.budget_bytes) {
        skip = absl::StrCat("the node's staging budget (", options_.budget_bytes, " bytes, ",
                            used_bytes_, " in use) cannot take ", grow, " more");
      } else {
        skip.clear();
        used_bytes_ += grow;
        break;
      }
      if (!req->wait) break;
      cv_.Wait(&mu_);
    }
    if (skip.empty()) {
      if (area->uploader.joinable()) finished_uploader = std::move(area->uploader);
      if (area->fd < 0) {
        area->fd = ::open(area->path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      }
      if (area->fd < 0 || (req->bytes > area->capacity &&
                           ::ftruncate(area->fd, static_cast<off_t>(req->bytes)) != 0)) {
        absl::Status s = absl::ResourceExhaustedError(
            absl::StrCat("creating staging area ", area->path, ": ", strerror(errno)));
        used_bytes_ -= req->bytes > area->capacity ? req->bytes - area->capacity : 0;
        ATHANOR_LOG(ERROR) << s.ToString();
        return SendFrame(conn->fd, ErrorReply(s));
      }
      area->capacity = std::max(area->capacity, req->bytes);
      area->staged = true;
      area->attempt = req->attempt;
      area->world_size = req->world_size;
      area->keep_last = req->keep_last;
      area->step = req->step;
      area->uri = req->uri;
      area->env = req->env;
      fd = area->fd;
      area_id = area->id;
      capacity = area->capacity;
    }
  }
  if (finished_uploader.joinable()) finished_uploader.join();
  if (!skip.empty()) {
    return SendFrame(conn->fd, {{"ok", false}, {"skip", true}, {"reason", skip}});
  }
  return SendFrame(conn->fd, {{"ok", true}, {"area", area_id}, {"capacity", capacity}}, fd);
}

absl::Status CheckpointService::HandleHandoff(Connection* conn, const nlohmann::json& msg) {
  auto field = msg.find("manifest");
  if (field == msg.end() || !field->is_string()) {
    return SendFrame(conn->fd, ErrorReply(absl::InvalidArgumentError(
                                   "field 'manifest' must be a string")));
  }
  const std::string text = field->get<std::string>();
  absl::StatusOr<RankManifest> manifest = DecodeManifest(text);
  if (!manifest.ok()) return SendFrame(conn->fd, ErrorReply(manifest.status()));
  Area* area;
  {
    absl::MutexLock lock(&mu_);
    area = conn->area;
    absl::Status bad;
    if (area == nullptr || !area->staged) {
      bad = absl::FailedPreconditionError("hand-off without a staged area (send 'stage' first)");
    } else if (manifest->job != area->job || manifest->rank != area->rank ||
               manifest->world_size != area->world_size || manifest->step != area->step ||
               manifest->shard_key !=
                   ckpt_layout::ShardKey(area->job, area->step, area->rank, area->world_size)) {
      bad = absl::InvalidArgumentError(absl::StrCat(
          "the hand-off's manifest (", manifest->shard_key, ") is not the shard staged: step ",
          area->step, " rank ", area->rank, " of ", area->world_size, " of ", area->job));
    } else if (manifest->shard_size > area->capacity) {
      bad = absl::InvalidArgumentError(absl::StrCat("the hand-off's shard is ",
                                                    manifest->shard_size, " bytes, the area ",
                                                    area->capacity));
    }
    if (!bad.ok()) return SendFrame(conn->fd, ErrorReply(bad));
    area->manifest = std::move(*manifest);
    area->staged = false;
    area->uploading = true;
    std::ofstream(area->path + ".handoff")
        << "job " << area->job << " step " << area->step << " rank " << area->rank << " of "
        << area->world_size << " attempt " << area->attempt;
    area->uploader = std::thread([this, area] { UploadArea(area); });
  }
  return SendFrame(conn->fd, {{"ok", true}});
}

void CheckpointService::UploadArea(Area* area) {
  // Only this thread touches the area's request fields while uploading.
  RankManifest& m = area->manifest;
  ShardUploadEvent event{m.job, area->attempt, m.step, m.rank, m.world_size, false, ""};
  if (absl::Status r = reporter_->ShardUpload(event); !r.ok()) {
    ATHANOR_LOG(WARNING) << "reporting the hand-off of " << m.shard_key << " failed: " << r.ToString();
  }
  absl::Status status;
  const auto upload_start = std::chrono::steady_clock::now();
  void* base = MAP_FAILED;
  if (m.shard_size > 0) {
    base = ::mmap(nullptr, m.shard_size, PROT_READ, MAP_SHARED, area->fd, 0);
  }
  if (base == MAP_FAILED) {
    status = absl::InternalError(absl::StrCat("mapping ", area->path, ": ", strerror(errno)));
  }
  ATHANOR_LOG(INFO) << "checkpoint service: uploading " << m.shard_key << " (" << m.shard_size
                    << " bytes) for attempt " << area->attempt;
  absl::StatusOr<std::unique_ptr<ObjectStore>> store = opener_(area->uri, area->env);
  if (status.ok() && !store.ok()) status = Annotate(store.status(), area->uri);
  if (status.ok()) {
    std::unique_ptr<ObjectStore> target = std::move(*store);
    if (options_.upload_bytes_per_second > 0) {
      target = std::make_unique<ThrottledStore>(std::move(target), options_.upload_bytes_per_second);
    }
    status = UploadStagedShard(target.get(), static_cast<const char*>(base),
                               options_.upload_chunk_bytes, &m);
  }
  if (base != MAP_FAILED) ::munmap(base, m.shard_size);
  CountUpload(status.ok(), m.shard_size,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count());
  if (status.ok()) {
    DurableShard d{m.job, area->attempt, m.step, m.rank, m.world_size, area->uri, m.shard_key,
                   m.shard_size, m.shard_crc32c, ckpt_layout::ManifestKey(m.job, m.step, m.rank),
                   ManifestCrc(m), area->keep_last};
    ATHANOR_LOG(INFO) << "checkpoint service: " << m.shard_key << " durable (" << m.shard_size
                      << " bytes)";
    if (absl::Status r = reporter_->ShardDurable(d); !r.ok()) {
      ATHANOR_LOG(WARNING) << "reporting " << m.shard_key << " durable failed: " << r.ToString();
    }
  } else {
    ATHANOR_LOG(ERROR) << "checkpoint service: upload of " << m.shard_key << " to " << area->uri
                       << " failed; step " << m.step << " will not commit: " << status.ToString();
    event.failed = true;
    event.error = status.ToString();
    if (absl::Status r = reporter_->ShardUpload(event); !r.ok()) {
      ATHANOR_LOG(WARNING) << "reporting the failed upload of " << m.shard_key
                           << " failed: " << r.ToString();
    }
  }
  ::unlink((area->path + ".handoff").c_str());
  absl::MutexLock lock(&mu_);
  area->uploading = false;
  cv_.SignalAll();
  ReleaseIfUnusedLocked(area);
}

UploadTotals CheckpointService::upload_totals() const {
  absl::MutexLock lock(&stats_mu_);
  return totals_;
}

void CheckpointService::CountUpload(bool ok, uint64_t bytes, double seconds) {
  absl::MutexLock lock(&stats_mu_);
  if (ok) {
    ++totals_.uploaded;
    totals_.bytes += bytes;
    totals_.seconds += seconds;
  } else {
    ++totals_.failed;
  }
  if (options_.stats_path.empty()) return;
  const nlohmann::json j = {{"uploaded", totals_.uploaded}, {"failed", totals_.failed},
                            {"bytes", totals_.bytes},       {"upload_seconds", totals_.seconds},
                            {"pid", static_cast<int64_t>(getpid())}};
  const std::string tmp = options_.stats_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out.flush()) {
      ATHANOR_LOG(WARNING) << "checkpoint service: cannot write " << tmp;
      return;
    }
  }
  if (::rename(tmp.c_str(), options_.stats_path.c_str()) != 0) {
    ATHANOR_LOG(WARNING) << "checkpoint service: cannot rename " << tmp << ": " << strerror(errno);
  }
}

}  // namespace athanor::ckptsvc
