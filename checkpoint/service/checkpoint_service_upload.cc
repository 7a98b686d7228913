// CheckpointService: the hand-off request and the upload itself.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#include "checkpoint/service/tenant_identity.h"
#include "checkpoint/service/throttled_store.h"
#include "checkpoint/service/wire.h"
#include "checkpoint/shard_upload.h"
#include "common/escape.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor::ckptsvc {
namespace {

nlohmann::json ErrorReply(const absl::Status& s) {
  return {{"ok", false}, {"error", s.ToString()}};
}

}  // namespace

absl::Status CheckpointService::HandleHandoff(Connection* conn, const nlohmann::json& msg) {
  auto field = msg.find("manifest");
  if (field == msg.end() || !field->is_string()) {
    return SendFrame(conn->fd, ErrorReply(absl::InvalidArgumentError(
                                   "field 'manifest' must be a string")));
  }
  const std::string text = field->get<std::string>();
  absl::StatusOr<RankManifest> manifest = DecodeManifest(text);
  if (!manifest.ok()) return SendFrame(conn->fd, ErrorReply(manifest.status()));
  absl::Status bad;  // replied after mu_ is released
  {
    absl::MutexLock lock(&mu_);
    Area* area = conn->area;
    if (area != nullptr && !area->staged && !area->reclaimed.empty()) {
      bad = absl::FailedPreconditionError(absl::StrCat("the hand-off of step ", area->step,
                                                       " is refused: ", area->reclaimed));
    } else if (area == nullptr || !area->staged) {
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
    if (bad.ok()) {
      area->manifest = std::move(*manifest);
      area->staged = false;
      area->uploading = true;
      area->note_path = absl::StrCat(options_.staging_dir, "/", area->job, ".", area->rank, ".",
                                     area->id, ".handoff");
      std::ofstream(area->note_path)
          << "job " << area->job << " step " << area->step << " rank " << area->rank << " of "
          << area->world_size << " attempt " << area->attempt;
      area->uploader = std::thread([this, area] { UploadArea(area); });
    }
  }
  if (!bad.ok()) return SendFrame(conn->fd, ErrorReply(bad));
  return SendFrame(conn->fd, {{"ok", true}});
}

absl::Status CheckpointService::UploadAs(uid_t uid, gid_t gid, int fd, const std::string& uri,
                                         const std::map<std::string, std::string>& env,
                                         RankManifest* m) {
  // The area is a sealed memfd (it cannot shrink); checked again here, since
  // mapping past its end would kill the service with SIGBUS.
  struct stat st = {};
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (::fstat(fd, &st) != 0 || seals < 0 || (seals & F_SEAL_SHRINK) == 0 ||
      static_cast<uint64_t>(st.st_size) < m->shard_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the staging area of ", m->shard_key, " holds ", st.st_size, " bytes (seals ", seals,
        "), not the ", m->shard_size, " bytes handed off"));
  }
  // Every file the store opens (a file:// root, a file an AWS_* variable
  // names) is opened as the rank's uid.
  ASSIGN_OR_RETURN(std::unique_ptr<TenantFsIdentity> identity, TenantFsIdentity::Become(uid, gid));
  absl::StatusOr<std::unique_ptr<ObjectStore>> store = opener_(uri, env);
  if (!store.ok()) return Annotate(store.status(), uri);
  std::unique_ptr<ObjectStore> target = std::move(*store);
  if (options_.upload_bytes_per_second > 0) {
    target = std::make_unique<ThrottledStore>(std::move(target), options_.upload_bytes_per_second);
  }
  void* base = nullptr;
  if (m->shard_size > 0) {
    base = ::mmap(nullptr, m->shard_size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      return absl::InternalError(
          absl::StrCat("mapping the staging area of ", m->shard_key, ": ", strerror(errno)));
    }
  }
  absl::Status status =
      UploadStagedShard(target.get(), static_cast<const char*>(base), options_.upload_chunk_bytes, m);
  target.reset();  // closes the store's files as the rank's uid
  if (base != nullptr) ::munmap(base, m->shard_size);
  return status;
}

void CheckpointService::UploadArea(Area* area) {
  // Only this thread touches the area's request fields while uploading.
  RankManifest& m = area->manifest;
  ShardUploadEvent event{m.job, area->attempt, m.step, m.rank, m.world_size, false, ""};
  if (absl::Status r = reporter_->ShardUpload(event); !r.ok()) {
    ATHANOR_LOG(WARNING) << "reporting the hand-off of " << m.shard_key << " failed: " << EscapeControls(r.ToString());
  }
  const auto upload_start = std::chrono::steady_clock::now();
  ATHANOR_LOG(INFO) << "checkpoint service: uploading " << m.shard_key << " (" << m.shard_size
                    << " bytes) for attempt " << area->attempt;
  absl::Status status = UploadAs(area->uid, area->gid, area->fd, area->uri, area->env, &m);
  CountUpload(status.ok(), m.shard_size,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count());
  if (status.ok()) {
    DurableShard d{m.job, area->attempt, m.step, m.rank, m.world_size, area->uri, m.shard_key,
                   m.shard_size, m.shard_crc32c, ckpt_layout::ManifestKey(m.job, m.step, m.rank),
                   ManifestCrc(m), area->keep_last};
    ATHANOR_LOG(INFO) << "checkpoint service: " << m.shard_key << " durable (" << m.shard_size
                      << " bytes)";
    if (absl::Status r = reporter_->ShardDurable(d); !r.ok()) {
      ATHANOR_LOG(WARNING) << "reporting " << m.shard_key << " durable failed: " << EscapeControls(r.ToString());
    }
  } else {
    ATHANOR_LOG(ERROR) << "checkpoint service: upload of " << m.shard_key << " to " << EscapeControls(area->uri)
                       << " failed; step " << m.step << " will not commit: " << EscapeControls(status.ToString());
    event.failed = true;
    event.error = status.ToString();
    if (absl::Status r = reporter_->ShardUpload(event); !r.ok()) {
      ATHANOR_LOG(WARNING) << "reporting the failed upload of " << m.shard_key
                           << " failed: " << EscapeControls(r.ToString());
    }
  }
  ::unlink(area->note_path.c_str());
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
