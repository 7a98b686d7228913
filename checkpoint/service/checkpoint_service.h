// CheckpointService: the node checkpoint service (docs/architecture.md, "Who uploads").
//
// Ranks connect to its unix socket (wire.h); the service learns each peer's
// uid and gid from SO_PEERCRED and treats everything a rank sends as hostile
// (docs/security.md):
//  - Identity: the agent registers every rank it starts (rank_registry.h:
//    job, attempt, rank, uid, checkpoint root) over a folder ranks cannot
//    reach. A stage is refused (PermissionDenied) unless the job, attempt and
//    rank it names are registered, with the caller's uid (SO_PEERCRED), the
//    same checkpoint root and, where the agent fixed one, the same keep_last.
//  - Areas: for each (job, rank) the service owns one staging area, a memfd
//    it sizes and seals (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) before it
//    passes the descriptor to the rank, which maps it and copies its shard
//    in. The rank cannot shrink it under the upload (no SIGBUS), and no path
//    names it, so another job's ranks cannot open it. An area is reused by
//    the rank's next checkpoint (a larger one gets a fresh area) and freed
//    when the rank has gone and its upload is done.
//  - Files: the store is opened and written with the rank's uid and gid as
//    the upload thread's file-system identity (tenant_identity.h), so a
//    file:// root, a symlink planted in it, or a file an AWS_* variable
//    names reaches only what the rank itself could.
//
// Hand-off: once the service has accepted a hand-off it owns the bytes; it
// streams them to the job's store (the ObjectStore's multipart, retries and
// checksums; the job's own credentials) and writes the rank manifest, even if
// the rank exits or is killed meanwhile, then reports the shard durable to the
// DurableReporter (the coordinator, which writes COMMIT).
//
// Budget: the areas of all ranks together stay within `budget_bytes`, and
// those of one uid within `uid_budget_bytes`. A stage request that does not
// fit (or whose area is still uploading) waits, at most `stage_wait_timeout`,
// or is answered "skip" at once when the rank's policy is skip: every request
// gets a reply. An area granted but not handed off within `handoff_timeout`
// is reclaimed when another request waits (its hand-off is then refused).
// Live connections are capped per uid and in all; one over the cap is
// answered with an error and closed.
//
// Restart: areas left by an earlier run are discarded at Start, and each one
// that was handed off but not durable is named in the log and reported failed
// (its step then never commits; the job resumes from its previous committed
// step without waiting for it).
//
// Threading: a thread per connection and per upload, state under mu_. The
// reporter and store opener are called from upload threads, never under mu_.
// The destructor stops accepting, closes connections and joins every thread
// (in-flight uploads finish first).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpoint/manifest.h"
#include "checkpoint/object_store.h"
#include "checkpoint/service/rank_registry.h"
#include "checkpoint/service/stage_request.h"
#include "nlohmann/json.hpp"

namespace athanor::ckptsvc {

// One shard made durable by the service.
struct DurableShard {
  std::string job;
  int32_t attempt = 0;
  int64_t step = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
  std::string uri;
  std::string shard_key;
  uint64_t shard_size = 0;
  uint32_t shard_crc32c = 0;
  std::string manifest_key;
  uint32_t manifest_crc32c = 0;
  int32_t keep_last = 0;
};

// A shard the service took over (failed false) or could not make durable.
struct ShardUploadEvent {
  std::string job;
  int32_t attempt = 0;
  int64_t step = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
  bool failed = false;
  std::string error;  // failed: why
};

class DurableReporter {
 public:
  virtual ~DurableReporter() = default;
  // Called from an upload thread as it starts (the coordinator then holds a
  // requeued job until the step commits or fails), on a failed upload, and
  // from Start for each handed-off area an earlier run left. An error is
  // logged; the default does nothing.
  virtual absl::Status ShardUpload(const ShardUploadEvent& /*event*/) { return absl::OkStatus(); }
  // Called once per durable shard, from an upload thread. An error is logged;
  // the coordinator also finds complete steps on its own (checkpoint_commit.h).
  virtual absl::Status ShardDurable(const DurableShard& shard) = 0;
};

// Opens a job's store from its URI and its AWS_* variables.
using StoreOpener = std::function<absl::StatusOr<std::unique_ptr<ObjectStore>>(
    const std::string& uri, const std::map<std::string, std::string>& env)>;

struct CheckpointServiceOptions {
  std::string socket_path;
  // The agent's registrations of its ranks (RankRegistry); required: a stage
  // of a rank not registered there is refused.
  std::string registry_dir;
  std::string staging_dir;  // the hand-off notes a restart reads (areas are memfds)
  uint64_t budget_bytes = 8ull << 30;
  // The share of `budget_bytes` one uid's areas may hold together (0: all of
  // it). The agent knows each tenant's share of the node's GPUs.
  uint64_t uid_budget_bytes = 0;
  // An area granted but not handed off within this is reclaimed once another
  // request waits for budget.
  absl::Duration handoff_timeout = absl::Minutes(5);
  // A stage request waits at most this for budget or for its previous upload,
  // then is answered "skip".
  absl::Duration stage_wait_timeout = absl::Minutes(10);
  // Live rank connections of one uid, and of all uids together.
  int max_connections_per_uid = 64;
  int max_connections = 1024;
  size_t upload_chunk_bytes = 1 << 20;
  // Caps the upload rate of each shard (0: unlimited), to leave the node's
  // network to training.
  uint64_t upload_bytes_per_second = 0;
  // When set, the upload totals (UploadTotals, as JSON) are written here after
  // each upload, replaced atomically, for the agent's /metrics.
  std::string stats_path;
};

// What this run of the service uploaded (a restart starts again from zero).
struct UploadTotals {
  uint64_t uploaded = 0;  // shards made durable
  uint64_t failed = 0;    // shards whose upload failed
  uint64_t bytes = 0;     // bytes of the durable shards
  double seconds = 0;     // time spent uploading them (store opening to durable)
};

class CheckpointService {
 public:
  // Discards leftover areas, listens, and starts serving. `reporter` is not
  // owned and must outlive the service.
  static absl::StatusOr<std::unique_ptr<CheckpointService>> Start(
      CheckpointServiceOptions options, DurableReporter* reporter, StoreOpener opener);
  ~CheckpointService();

  // Blocks until no upload is in flight (tests, orderly shutdown).
  void WaitIdle();
  uint64_t staged_bytes() const;
  UploadTotals upload_totals() const;

 private:
  struct Area;
  struct Connection;
  CheckpointService(CheckpointServiceOptions options, DurableReporter* reporter,
                    StoreOpener opener, int listen_fd, std::unique_ptr<RankRegistry> registry);
  // Why the stage `req` from `conn` disagrees with the agent's registration
  // of its rank (PermissionDenied); OK when it agrees.
  absl::Status CheckRegistration(const Connection& conn, const StageRequest& req) const;
  void AcceptLoop();
  void Serve(Connection* conn);
  absl::Status HandleStage(Connection* conn, const nlohmann::json& msg);
  absl::Status HandleHandoff(Connection* conn, const nlohmann::json& msg);
  void UploadArea(Area* area);
  // Opens the job's store and uploads the handed-off shard from the area's
  // `fd`, with uid/gid as the calling thread's file-system identity.
  absl::Status UploadAs(uid_t uid, gid_t gid, int fd, const std::string& uri,
                        const std::map<std::string, std::string>& env, RankManifest* m);
  void ReleaseIfUnusedLocked(Area* area) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes back the budget of every area granted to another rank more than
  // handoff_timeout before `now` and not handed off; returns the earliest
  // time one still granted expires (InfiniteFuture if none).
  absl::Time ReclaimExpiredLocked(absl::Time now, const Area* except)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t UidBytesLocked(uid_t uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a new connection from `uid` is refused; empty if it is not.
  std::string ConnectionRefusalLocked(uid_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds one upload to the totals and rewrites options_.stats_path.
  void CountUpload(bool ok, uint64_t bytes, double seconds);

  const CheckpointServiceOptions options_;
  DurableReporter* const reporter_;
  const StoreOpener opener_;
  const int listen_fd_;
  const std::unique_ptr<RankRegistry> registry_;
  std::thread acceptor_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_area_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::unique_ptr<Area>> areas_ ABSL_GUARDED_BY(mu_);  // "<job>/<rank>"
  std::vector<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  // Held across writing the stats file, so that concurrent uploads' writes do
  // not interleave; never taken under mu_.
  mutable absl::Mutex stats_mu_;
  UploadTotals totals_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace athanor::ckptsvc
