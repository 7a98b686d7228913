// WorkdirSnapshots: an interactive rank's work folder in instance snapshots
// (docs/operations.md, "Snapshots").
//
//   - Store: a rank the coordinator stopped with a snapshot_key (idle
//     reclaim) is, once removed, packed (storage::PackTree) and sent to the
//     coordinator (WorkdirData.StoreWorkdir, with its size and sha256), which
//     keeps it in its data store; then it is archived as every reclaimed
//     rank's work folder is (workdir_archive.h). A failed store is logged.
//   - Restore: a rank with a restore_key does not start until its work
//     folder is fetched (WorkdirData.FetchWorkdir) and unpacked
//     (storage::UnpackTree: nothing outside the folder, no device nodes, no
//     setuid; owned by the tenant's uid; bounded) into its rank folder.
//     AcquireRestore answers kPending at once and fetches on this object's
//     thread; `on_ready` is called there, with no lock held, when a fetch
//     ends, so that the agent converges again. A failed restore fails the
//     rank's start, naming why.
//
// Thread-safe (one mutex, never held during transfers or unpacking).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "security/tls.h"
#include "worker/agent/rank_supervisor.h"

namespace athanor::agent {

// A restored work folder is at most this big, unpacked, and holds at most
// this many entries.
inline constexpr int64_t kMaxRestoreBytes = int64_t{64} << 30;
inline constexpr int64_t kMaxRestoreEntries = 1'000'000;

// How work folders' tars move between this node and the coordinator.
// Blocking; the caller checks nothing the transport returns.
class WorkdirTransport {
 public:
  virtual ~WorkdirTransport() = default;
  virtual absl::Status Store(const RankKey& rank, const std::string& key, const std::string& tar_path,
                             const std::string& digest, int64_t size_bytes) = 0;
  // Writes the tar to the new file `tar_path`, at most `max_bytes`.
  virtual absl::Status Fetch(const RankKey& rank, const std::string& key, const std::string& tar_path,
                             int64_t max_bytes) = 0;
};

// WorkdirData over a channel of the agent's to the coordinator (mutual TLS
// with the node's certificate; `tls` nullopt: plaintext).
std::unique_ptr<WorkdirTransport> MakeCoordinatorWorkdirTransport(const std::string& coordinator,
                                                                  const std::optional<security::TlsMaterial>& tls);

class WorkdirSnapshots {
 public:
  // `work_dir`: the agent's (rank folders under it, RankSupervisor::RankDir);
  // `uid_of` owns what is unpacked (called on this object's thread).
  WorkdirSnapshots(std::string work_dir, std::unique_ptr<WorkdirTransport> transport,
                   std::function<uid_t(const std::string& tenant)> uid_of);
  ~WorkdirSnapshots();  // finishes the fetch in progress; drops the queue

  void SetOnReady(std::function<void()> on_ready);

  struct Lookup {
    enum State { kReady, kPending, kFailed } state = kReady;
    std::string error;
  };
  // Whether `target`'s work folder (target.restore_key) is in place. Never blocks.
  Lookup AcquireRestore(const RankTarget& target);
  // The rank started or gave up: its entry goes.
  void Forget(const RankKey& key);

  // Packs `dir` and stores it as `key` (blocking; the agent loop's, as
  // archives are).
  absl::Status Store(const RankKey& rank, const std::string& dir, const std::string& key);

 private:
  struct Restore {
    std::string key;
    std::string tenant;
    Lookup::State state = Lookup::kPending;
    std::string error;
  };
  void Loop();
  absl::Status FetchInto(const RankKey& rank, const Restore& what);

  const std::string work_dir_;
  const std::unique_ptr<WorkdirTransport> transport_;
  const std::function<uid_t(const std::string&)> uid_of_;
  absl::Mutex call_mu_;  // held while on_ready_ runs; before mu_
  absl::Mutex mu_;
  std::map<RankKey, Restore> restores_ ABSL_GUARDED_BY(mu_);
  std::deque<RankKey> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_ready_ ABSL_GUARDED_BY(call_mu_);
  std::thread thread_;
};

}  // namespace athanor::agent
