// VolumeSync: the agent's copies of the tenants' volumes its ranks mount
// (docs/operations.md, "Volumes").
//
// Before an attempt's first rank on this node starts, each volume the
// attempt mounts is fetched from the coordinator (NodeData.FetchVolume,
// through a VolumeTransport), its sha256 checked, and unpacked
// (storage::UnpackTree: nothing outside the tree, no device nodes, no setuid;
// owned by the tenant's uid) into VolumeDir(); the sandbox binds it at the
// job's mount path (read-only for `:ro`). A rank whose volumes are still
// being fetched is not started (Acquire answers kPending at once); a failed
// fetch fails the attempt's ranks here to start, naming the volume.
//
// When the attempt's last rank here has ended (success, failure,
// preemption, reclaim: RankEnded), each read-write volume is packed
// (storage::PackTree, deterministic) and, when its content changed, stored
// (NodeData.StoreVolume, from the generation it was fetched at); then the
// attempt's copies are removed. A failed store is logged here and in the
// attempt's rank logs; the volume keeps its last committed content (the
// coordinator commits a generation only once its whole blob is stored).
// An unchanged copy, or one that failed to pack or store, is reported
// (VolumeTransport::Report): the coordinator holds the job's next attempt
// until each read-write volume's store call has ended.
// An agent killed before that leaves the volume as it was last stored.
//
// Fetching and storing take as long as the volume is big, so they run on a
// thread of this object's own, never on the caller's: `on_ready` is called
// there, with no lock held, after each fetch ends, so that the agent can
// converge again at once.
//
// Thread-safe (one mutex, never held during transfers, packing or unpacking).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "security/tls.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// Where attempt `attempt` of `job` keeps its copy of volume `name` here:
// WORK_DIR/jobs/<job>/attempt-<a>/volumes/<name> (per attempt, so that a
// next attempt on this node never meets the last one's copy still syncing).
std::string VolumeDir(const std::string& work_dir, const std::string& job_id, int32_t attempt,
                      const std::string& name);

struct VolumeContent {
  int64_t generation = 0;  // 0: empty, never stored (no tar written)
  std::string digest;
  int64_t size_bytes = 0;
};

// How volumes' tars move between this node and the coordinator. Blocking;
// called from VolumeSync's thread only.
class VolumeTransport {
 public:
  virtual ~VolumeTransport() = default;
  // Writes the volume's current tar to the new file `tar_path` (none at
  // generation 0) and says which it is. The caller checks the digest.
  virtual absl::StatusOr<VolumeContent> Fetch(const std::string& job_id, int32_t attempt, const std::string& volume,
                                              const std::string& tar_path) = 0;
  // Stores the tar at `tar_path` as the volume's next generation after
  // `base_generation`; the coordinator's refusal as its status.
  virtual absl::Status Store(const std::string& job_id, int32_t attempt, const std::string& volume,
                             int64_t base_generation, const std::string& tar_path, const VolumeContent& content) = 0;
  // Tells the coordinator that the attempt's copy of `volume` is not stored
  // (a StoreVolume of no content): it is as fetched, or could not be stored.
  // The job's next attempt waits for one store call per read-write volume.
  virtual absl::Status Report(const std::string& job_id, int32_t attempt, const std::string& volume,
                              int64_t base_generation) = 0;
};

// NodeData.FetchVolume / StoreVolume over a channel of the agent's to the
// coordinator (mutual TLS with the node's certificate; `tls` nullopt: plaintext).
std::unique_ptr<VolumeTransport> MakeCoordinatorVolumeTransport(const std::string& coordinator,
                                                                const std::optional<security::TlsMaterial>& tls);

class VolumeSync {
 public:
  // `uid_of` (the sandbox's tenant uids) owns what is unpacked; it is called
  // on this object's thread.
  VolumeSync(std::string work_dir, std::unique_ptr<VolumeTransport> transport,
             std::function<uid_t(const std::string& tenant)> uid_of);
  ~VolumeSync();  // finishes the transfer in progress; drops the queue

  // Called (on this object's thread, no lock of the caller's held) after
  // each fetch ends. Setting waits out a call in progress.
  void SetOnReady(std::function<void()> on_ready);

  struct Lookup {
    enum State { kReady, kPending, kFailed } state = kReady;
    std::string error;  // kFailed: which volume, and why
  };
  // Whether `target`'s volumes are here (kReady: start it and call
  // RankStarted), being fetched, or failed. Never blocks.
  Lookup Acquire(const RankTarget& target);
  void RankStarted(const RankKey& key);
  // A rank that started (or was refused at the start) has ended; after the
  // attempt's last here, its copies are synced up and removed.
  void RankEnded(const RankKey& key);

  // Blocks until the queue is empty and no transfer runs (tests).
  void Drain();

 private:
  using AttemptKey = std::pair<std::string, int32_t>;
  struct Attempt {
    std::string tenant;
    std::vector<VolumeMountTarget> volumes;
    Lookup::State state = Lookup::kPending;
    std::string error;
    std::map<std::string, VolumeContent> fetched;  // by volume name
    std::set<int32_t> live;                        // ranks started and not ended
    std::set<int32_t> ranks;                       // every rank that started (their logs)
    bool syncing = false;
  };
  struct Task {
    AttemptKey key;
    bool store = false;  // else fetch
  };
  void Loop();
  void FetchAll(const AttemptKey& key, Attempt snapshot);
  void StoreAll(const AttemptKey& key, Attempt snapshot);
  // Appends `line` to the logs of the attempt's ranks here, and logs it.
  void Tell(const AttemptKey& key, const std::set<int32_t>& ranks, const std::string& line, bool warning);

  const std::string work_dir_;
  const std::unique_ptr<VolumeTransport> transport_;
  const std::function<uid_t(const std::string&)> uid_of_;
  absl::Mutex call_mu_;  // held while on_ready_ runs; before mu_
  absl::Mutex mu_;
  std::map<AttemptKey, Attempt> attempts_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_ready_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace athanor::agent
