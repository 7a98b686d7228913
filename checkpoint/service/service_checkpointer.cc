#include "checkpoint/service/service_checkpointer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/service/wire.h"
#include "checkpoint/shard_upload.h"
#include "checkpoint/stream_copy.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

// The error a reply carries, or OK.
absl::Status ReplyStatus(const nlohmann::json& reply, const std::string& what) {
  if (reply.value("ok", false)) return absl::OkStatus();
  std::string error = reply.contains("error") && reply["error"].is_string()
                          ? reply["error"].get<std::string>()
                          : "no reason given";
  return absl::FailedPreconditionError(absl::StrCat("checkpoint service refused ", what, ": ", error));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServiceCheckpointer>> ServiceCheckpointer::Connect(
    ServiceCheckpointerOptions options) {
  ASSIGN_OR_RETURN(int sock, ckptsvc::ConnectService(options.socket_path));
  return std::unique_ptr<ServiceCheckpointer>(new ServiceCheckpointer(std::move(options), sock));
}

ServiceCheckpointer::~ServiceCheckpointer() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  ::close(sock_);
}

absl::Status ServiceCheckpointer::MapArea(int fd, uint64_t area, uint64_t capacity) {
  if (map_ != nullptr && area == area_id_ && capacity == map_size_) {
    ::close(fd);  // the same area, already mapped
    return absl::OkStatus();
  }
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mapping the ", capacity,
                                            "-byte checkpoint staging area: ", strerror(errno)));
  }
  map_ = static_cast<char*>(p);
  map_size_ = capacity;
  area_id_ = area;
  return absl::OkStatus();
}

absl::StatusOr<bool> ServiceCheckpointer::Save(int64_t step, const TrainingState& state) {
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(SafetensorsLayout layout,
                   PlanShard(state, step, options_.rank, options_.world_size));
  absl::MutexLock lock(&socket_mu_);
  // The previous hand-off's answer first (it precedes anything on the socket).
  if (handoff_due_) RETURN_IF_ERROR(CollectHandoff());
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : options_.env) env[k] = v;
  nlohmann::json stage = {{"op", "stage"},
                          {"job", options_.job},
                          {"attempt", options_.attempt},
                          {"rank", options_.rank},
                          {"world_size", options_.world_size},
                          {"step", step},
                          {"bytes", layout.total_size},
                          {"wait", options_.in_flight == InFlightPolicy::kWait},
                          {"uri", options_.uri},
                          {"keep_last", options_.keep_last},
                          {"env", env}};
  absl::Status status = ckptsvc::SendFrame(sock_, stage);
  absl::StatusOr<ckptsvc::Frame> reply =
      status.ok() ? ckptsvc::RecvFrame(sock_) : absl::StatusOr<ckptsvc::Frame>(status);
  if (!reply.ok()) return last_status_ = Annotate(reply.status(), "checkpoint service");
  if (reply->msg.value("skip", false)) {
    if (reply->fd >= 0) ::close(reply->fd);
    ATHANOR_LOG(INFO) << "checkpoint of step " << step << " skipped: "
                      << reply->msg.value("reason", std::string());
    return false;
  }
  status = ReplyStatus(reply->msg, absl::StrCat("staging step ", step));
  const uint64_t capacity = reply->msg.value("capacity", uint64_t{0});
  if (status.ok() && (reply->fd < 0 || capacity < layout.total_size)) {
    status = absl::InternalError("the checkpoint service granted no area large enough");
  }
  if (!status.ok()) {
    if (reply->fd >= 0) ::close(reply->fd);
    return last_status_ = status;
  }
  RETURN_IF_ERROR(last_status_ = MapArea(reply->fd, reply->msg.value("area", uint64_t{0}), capacity));
  const auto copy_start = std::chrono::steady_clock::now();
  std::memcpy(map_, layout.header.data(), layout.header.size());
  std::vector<ShardSpec> specs;
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const TensorRef& t = state.tensors[i];
    if (t.bytes > 0) StreamCopy(map_ + layout.data_start + layout.entries[i].begin, t.data, t.bytes);
    specs.push_back(t.shard);
  }
  stats_.copy_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  RankManifest manifest =
      PlanManifest(options_.job, step, options_.rank, options_.world_size, layout, specs);
  status = ckptsvc::SendFrame(sock_, {{"op", "handoff"}, {"manifest", EncodeManifest(manifest)}});
  if (!status.ok()) return last_status_ = Annotate(status, "checkpoint service hand-off");
  handoff_due_ = true;  // its answer is read by the next call
  handoff_step_ = step;
  stats_.stall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.shard_bytes = layout.total_size;
  return true;
}

absl::Status ServiceCheckpointer::CollectHandoff() const {
  if (!handoff_due_) return last_status_;
  handoff_due_ = false;
  absl::StatusOr<ckptsvc::Frame> reply = ckptsvc::RecvFrame(sock_);
  if (!reply.ok()) return last_status_ = Annotate(reply.status(), "checkpoint service hand-off");
  if (reply->fd >= 0) ::close(reply->fd);
  return last_status_ =
             ReplyStatus(reply->msg, absl::StrCat("the hand-off of step ", handoff_step_));
}

absl::Status ServiceCheckpointer::Wait() {
  absl::MutexLock lock(&socket_mu_);
  return CollectHandoff();
}

bool ServiceCheckpointer::in_flight() const {
  absl::MutexLock lock(&socket_mu_);
  if (absl::Status handed = CollectHandoff(); !handed.ok()) {
    return false;  // the next Save reports it; nothing of ours is in flight
  }
  absl::Status s = ckptsvc::SendFrame(sock_, {{"op", "status"}});
  absl::StatusOr<ckptsvc::Frame> reply =
      s.ok() ? ckptsvc::RecvFrame(sock_) : absl::StatusOr<ckptsvc::Frame>(s);
  if (!reply.ok()) {
    // The next Save reports the lost service; nothing is in flight here.
    ATHANOR_LOG(WARNING) << "checkpoint service status: " << reply.status().ToString();
    return false;
  }
  if (reply->fd >= 0) ::close(reply->fd);
  return reply->msg.value("busy", false);
}

CheckpointStats ServiceCheckpointer::stats() const { return stats_; }

}  // namespace athanor
