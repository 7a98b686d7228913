// CheckpointService: the stage request, which grants a rank its staging area.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/service/checkpoint_service.h"
#include "checkpoint/service/service_area.h"
#include "checkpoint/service/stage_request.h"
#include "checkpoint/service/wire.h"
#include "common/escape.h"
#include "common/logging.h"

namespace athanor::ckptsvc {
namespace {

nlohmann::json ErrorReply(const absl::Status& s) {
  return {{"ok", false}, {"error", s.ToString()}};
}

// A memfd of `bytes`, sealed so that neither the rank it is passed to nor
// anyone else can change its size: the upload's mapping never faults.
absl::StatusOr<int> CreateSealedArea(const std::string& name, uint64_t bytes) {
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", strerror(errno)));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    absl::Status s = absl::ResourceExhaustedError(
        absl::StrCat("sizing and sealing a ", bytes, "-byte memfd: ", strerror(errno)));
    ::close(fd);
    return s;
  }
  return fd;
}

}  // namespace

absl::Status CheckpointService::CheckRegistration(const Connection& conn, const StageRequest& req) const {
  const std::string who = absl::StrCat("job ", req.job, " attempt ", req.attempt, " rank ", req.rank);
  absl::StatusOr<RankBinding> b = registry_->Lookup(req.job, req.attempt, req.rank);
  if (absl::IsNotFound(b.status())) {
    return absl::PermissionDeniedError(absl::StrCat(
        who, " is not registered with this node's checkpoint service: only ranks this node's agent started "
             "may stage, and only as themselves"));
  }
  if (!b.ok()) return absl::PermissionDeniedError(absl::StrCat(who, ": ", b.status().message()));
  if (b->uid != conn.uid) {
    return absl::PermissionDeniedError(
        absl::StrCat(who, " runs as uid ", b->uid, " on this node; uid ", conn.uid, " may not stage for it"));
  }
  if (b->uri != req.uri) {
    return absl::PermissionDeniedError(absl::StrCat(who, ": the stage names checkpoint root '", req.uri,
                                                    "', not the job's ('", b->uri, "')"));
  }
  if (b->keep_last > 0 && b->keep_last != req.keep_last) {
    return absl::PermissionDeniedError(absl::StrCat(who, ": the stage asks for keep_last ", req.keep_last,
                                                    ", not the job's ", b->keep_last));
  }
  return absl::OkStatus();
}

absl::Status CheckpointService::HandleStage(Connection* conn, const nlohmann::json& msg) {
  absl::StatusOr<StageRequest> req = ParseStageRequest(msg, options_.budget_bytes);
  if (!req.ok()) return SendFrame(conn->fd, ErrorReply(req.status()));
  if (absl::Status registered = CheckRegistration(*conn, *req); !registered.ok()) {
    ATHANOR_LOG(WARNING) << "checkpoint service: refusing a stage from uid " << conn->uid << ": "
                         << EscapeControls(registered.message());
    return SendFrame(conn->fd, ErrorReply(registered));
  }
  const uint64_t uid_budget =
      options_.uid_budget_bytes > 0 ? options_.uid_budget_bytes : options_.budget_bytes;
  if (req->bytes > uid_budget) {
    return SendFrame(conn->fd, ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
                                   "a ", req->bytes, "-byte shard can never fit uid ", conn->uid,
                                   "'s ", uid_budget, "-byte share of the node's staging budget"))));
  }
  const std::string key = absl::StrCat(req->job, "/", req->rank);
  std::thread finished_uploader;
  // The reply, sent after mu_ is released (a rank slow to read must not
  // stall the service).
  nlohmann::json reply;
  int fd = -1;
  {
    absl::MutexLock lock(&mu_);
    auto refuse = [&](const absl::Status& s) { reply = ErrorReply(s); };
    if (conn->area != nullptr && conn->area->key != key) {
      refuse(absl::FailedPreconditionError(
          absl::StrCat("this connection stages for ", conn->area->key, ", not ", key)));
    }
    Area* area = nullptr;
    if (reply.is_null()) {
      std::unique_ptr<Area>& slot = areas_[key];
      if (slot == nullptr) {
        slot = std::make_unique<Area>();
        slot->key = key;
        slot->job = req->job;
        slot->rank = req->rank;
        slot->uid = conn->uid;
        slot->gid = conn->gid;
      }
      area = slot.get();
      if (area->owner != nullptr && area->owner != conn) {
        refuse(absl::AlreadyExistsError(absl::StrCat(
            "rank ", req->rank, " of ", req->job, " is already connected to the checkpoint service")));
      }
    }
    std::string skip;
    if (reply.is_null()) {
      area->owner = conn;
      conn->area = area;
      const absl::Time give_up = absl::Now() + options_.stage_wait_timeout;
      for (;;) {
        if (stopping_) return absl::CancelledError("the checkpoint service is stopping");
        const absl::Time now = absl::Now();
        const absl::Time next_expiry = ReclaimExpiredLocked(now, area);
        const uint64_t grow = req->bytes > area->capacity ? req->bytes - area->capacity : 0;
        const uint64_t uid_used = UidBytesLocked(conn->uid);
        if (area->uploading) {
          skip = "the previous checkpoint of this rank is still uploading";
        } else if (uid_used + grow > uid_budget) {
          skip = absl::StrCat("uid ", conn->uid, "'s share of the node's staging budget (",
                              uid_budget, " bytes, ", uid_used, " in use) cannot take ", grow,
                              " more");
        } else if (used_bytes_ + grow > options_.budget_bytes) {
          skip = absl::StrCat("the node's staging budget (", options_.budget_bytes, " bytes, ",
                              used_bytes_, " in use) cannot take ", grow, " more");
        } else {
          skip.clear();
          used_bytes_ += grow;
          break;
        }
        if (!req->wait) break;
        if (now >= give_up) {
          absl::StrAppend(&skip, " (waited ", absl::FormatDuration(options_.stage_wait_timeout), ")");
          break;
        }
        cv_.WaitWithDeadline(&mu_, std::min(give_up, next_expiry));
      }
      if (!skip.empty()) reply = {{"ok", false}, {"skip", true}, {"reason", skip}};
    }
    if (reply.is_null()) {
      if (area->uploader.joinable()) finished_uploader = std::move(area->uploader);
      if (area->fd < 0 || req->bytes > area->capacity) {
        // A fresh area (seals forbid growing one): a new id, so the rank maps it anew.
        const uint64_t size = std::max(req->bytes, area->capacity);
        absl::StatusOr<int> fresh =
            CreateSealedArea(absl::StrCat("athanor-ckpt-", req->job, ".", req->rank), size);
        if (!fresh.ok()) {
          used_bytes_ -= size - area->capacity;
          ATHANOR_LOG(ERROR) << "checkpoint service: staging area of rank " << req->rank << " of "
                             << req->job << ": " << fresh.status();
          reply = ErrorReply(fresh.status());
        } else {
          if (area->fd >= 0) ::close(area->fd);
          area->fd = *fresh;
          area->id = next_area_id_++;
          area->capacity = size;
        }
      }
    }
    if (reply.is_null()) {
      area->staged = true;
      area->reclaimed.clear();
      area->granted_at = absl::Now();
      area->attempt = req->attempt;
      area->world_size = req->world_size;
      area->keep_last = req->keep_last;
      area->step = req->step;
      area->uri = req->uri;
      area->env = req->env;
      // Dup'ed under mu_: a reclaim may close the area's own fd before it is sent.
      fd = ::fcntl(area->fd, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        reply = ErrorReply(absl::ResourceExhaustedError(
            absl::StrCat("duplicating the staging area's fd: ", strerror(errno))));
      } else {
        reply = {{"ok", true}, {"area", area->id}, {"capacity", area->capacity}};
      }
    }
  }
  if (finished_uploader.joinable()) finished_uploader.join();
  absl::Status sent = SendFrame(conn->fd, reply, fd);
  if (fd >= 0) ::close(fd);
  return sent;
}

}  // namespace athanor::ckptsvc
