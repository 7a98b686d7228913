// Internals of the ucx backend, shared by ucx_communicator.cc (bootstrap,
// endpoints, public calls) and ucx_progress.cc (the schedule executor).
// Not part of the API: include collectives/ucx/ucx_communicator.h instead.
//
// Thread model (see ucx_communicator.h): mu_ guards the worker, the endpoints'
// use and every PendingOp; UCX callbacks run inside ucp_worker_progress, which
// is only ever called with mu_ held. The progress thread (ucx_thread.cc)
// sleeps without mu_ in poll().
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/ucx/hier_exchange.h"
#include "collectives/ucx/schedule.h"
#include "collectives/ucx/shm_all_reduce.h"
#include "collectives/ucx/topology.h"
#include "collectives/ucx/ucx_communicator.h"
#include "common/annotated_mutex.h"

namespace athanor {
namespace ucx_internal {

using SteadyTime = std::chrono::steady_clock::time_point;

inline absl::Status UcsError(const std::string& what, ucs_status_t s) {
  return absl::InternalError(absl::StrCat(what, ": ", ucs_status_string(s)));
}

struct PendingOp;

// Run-time state of one chain of a schedule.
struct ChainState {
  PendingOp* op = nullptr;
  size_t index = 0;
  size_t step = 0;
  bool started = false;
  bool done = false;
  int pending = 0;  // requests of the current step still in flight
  void* send_req = nullptr;
  void* recv_req = nullptr;
  ucs_status_t error = UCS_OK;
  int error_peer = -1;
};

struct PendingOp {
  Schedule schedule;
  std::vector<ChainState> chains;
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t tag_base = 0;  // user tag and sequence bits
  const char* kind = "";  // "all-reduce", for messages
  uint64_t user_tag = 0;
  std::string What() const { return absl::StrCat(kind, " (tag ", user_tag, ")"); }
  SteadyTime deadline;
  size_t next_chain = 0;
  size_t low_chain = 0;  // every chain below this one is done
  size_t outstanding = 0;
  uint32_t advance_calls = 0;
  bool finished = false;
  bool reported = false;  // on_done was called
  absl::Status status;
  char* scratch = nullptr;
  size_t scratch_bytes = 0;
  std::unique_ptr<ShmOp> shared;  // set: runs on the shared-memory path
};

inline uint64_t MakeTag(uint64_t tag_base, int sender, size_t chain, int msg) {
  return tag_base | (static_cast<uint64_t>(sender & 0xFFF) << 24) |
         (static_cast<uint64_t>(chain & 0xFFF) << 12) | static_cast<uint64_t>(msg & 0xFFF);
}
constexpr uint64_t kFullMask = ~0ull;
constexpr uint64_t kHelloTagBase = 0xFFFFFull << 44;

// UCX completion callbacks (ucx_progress.cc); user_data is the ChainState.
void SendDone(void* request, ucs_status_t status, void* user_data);
void RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data);

class UcxCommunicator;

struct EpContext {
  UcxCommunicator* comm;
  int peer;
};

class UcxCommunicator final : public Communicator {
 public:
  UcxCommunicator(const CommunicatorOptions& options, const UcxTuning& tuning)
      : options_(options), tuning_(tuning) {}
  ~UcxCommunicator() override;

  absl::Status Init();

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  std::string backend() const override { return "ucx"; }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override;
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& options) override;
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& options) override;
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& options) override;
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& options) override;
  void Abort() override;

  // Called by UcxWork.
  absl::Status WaitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout);
  bool Poll(const std::shared_ptr<PendingOp>& op);
  // Called by UCX from ucp_worker_progress (under mu_).
  void OnPeerError(int peer, ucs_status_t status);

 private:
  ScheduleParams Params(DataType type, ReduceOp op, size_t block_bytes);
  // Under mu_: takes `scratch_bytes` of scratch into params.scratch, builds
  // the schedule with build(params), posts its first steps.
  template <typename Build>
  std::unique_ptr<Work> Submit(ScheduleParams params, size_t scratch_bytes, DataType type,
                               ReduceOp op, const char* what, const CollectiveOptions& options,
                               Build build);
  char* AcquireScratch(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocking 2-rank small all-reduce (ucx_pair.cc): one send and one receive
  // with the same tags as RecursiveDoublingAllReduce's, progressed inline,
  // no schedule or PendingOp. nullptr: not applicable, use the generic path.
  std::unique_ptr<Work> PairAllReduce(const void* send, void* recv, size_t count, DataType type,
                                      ReduceOp op, const CollectiveOptions& options);
  // The shared-memory all-reduce (ShmAllReduce, shm_all_reduce.h; glue in
  // ucx_shm.cc): the whole all-reduce when every rank is on this host, the
  // hierarchical one (with HierExchange between hosts) when ranks share
  // hosts but not all one. SetUpShared maps the segments of this host's
  // ranks; all ranks agree whether the path is on.
  absl::Status SetUpShared();
  void TearDownShared();
  bool UseShared(size_t bytes) const;
  bool UseHierarchical(size_t bytes) const;
  std::unique_ptr<Work> SharedAllReduce(const void* send, void* recv, size_t count, DataType type,
                                        ReduceOp op, const CollectiveOptions& options);
  // Moves a shared op as far as the peers allow; never blocks.
  void AdvanceShared(PendingOp* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs, once per power-of-two size class, which all-reduce algorithm runs.
  void LogChoice(size_t bytes, const char* algorithm);
  bool ChoiceLogged(size_t bytes) const;
  // Returns how many UCX events and finished operations it saw.
  unsigned ProgressLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls the local peers' pidfds; sets peer_error_ when one exited.
  void CheckPeersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsWatchedLocked(int peer) const;
  // Progress thread (ucx_thread.cc).
  absl::Status StartProgressThread();
  void StopProgressThread();
  void ProgressThreadMain();
  // Wakes the progress thread if it sleeps (it then looks at ops_ again).
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A thread enters / leaves Work::Wait.
  void EnterWait();
  void LeaveWait();
  void Advance(PendingOp* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PostStep(PendingOp* op, ChainState* cs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishStep(PendingOp* op, ChainState* cs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(PendingOp* op, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAll(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Hello();
  void LogTransports();
  // UCX's lanes to `peer`, as ucp_ep_print_info names them ("lane[0]: ...; ...").
  std::string Lanes(int peer) const;

  // Constant after Init().
  const CommunicatorOptions options_;
  const UcxTuning tuning_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  bool started_ = false;  // Init() finished: every rank holds endpoints to us
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::unique_ptr<EpContext>> ep_contexts_;
  struct PeerWatch {
    int rank, pid, pidfd;  // pidfd becomes readable when the process ends
  };
  std::vector<PeerWatch> peer_watch_;
  bool oversubscribed_ = false;  // more ranks on this host than cores
  SteadyTime next_watch_ ABSL_GUARDED_BY(mu_);
  uint32_t progress_calls_ ABSL_GUARDED_BY(mu_) = 0;

  // Guards the worker and everything marked "guarded by mu_". A std::mutex
  // (annotated for clang's analysis): Debian's absl::Mutex runs deadlock
  // detection on every Lock.
  StdMutex mu_;
  // The progress thread; wake_fd_ is its eventfd, worker_fd_ UCX's event fd
  // (-1 when the worker has none: the thread then naps a millisecond).
  std::thread progress_thread_;
  int wake_fd_ = -1;
  int worker_fd_ = -1;
  std::atomic<int> waiters_{0};
  std::atomic<size_t> num_ops_{0};  // ops_.size(), readable without mu_
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // sticky: set on peer death, timeout or Abort
  absl::Status peer_error_ ABSL_GUARDED_BY(mu_);  // set by the endpoint error callback
  // An endpoint error from a pid-watched peer, promoted to peer_error_ after
  // kDeferPeerError unless a pidfd names a dead rank first.
  absl::Status deferred_peer_error_ ABSL_GUARDED_BY(mu_);
  SteadyTime deferred_since_ ABSL_GUARDED_BY(mu_);
  // A local peer's exit was deferred (ranks on other hosts may name the
  // rank that died first); its pidfd is not polled again.
  bool exit_deferred_ ABSL_GUARDED_BY(mu_) = false;
  static constexpr std::chrono::milliseconds kDeferPeerError{300};
  std::list<std::shared_ptr<PendingOp>> ops_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint32_t> sequence_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<size_t, char*>> free_scratch_ ABSL_GUARDED_BY(mu_);  // (bytes, buffer)
  std::vector<char*> all_scratch_ ABSL_GUARDED_BY(mu_);
  char* pair_scratch_ ABSL_GUARDED_BY(mu_) = nullptr;  // PairAllReduce's receive buffer

  // Where the ranks live (constant after Init()).
  Topology topology_;
  // Shared-memory and hierarchical paths (ucx_shm.cc); constant after
  // Init(); shm_ and inter_ are used under mu_.
  bool shared_on_ = false;  // every rank on this host: ShmAllReduce alone
  bool hier_on_ = false;    // several hosts: ShmAllReduce + HierExchange
  std::unique_ptr<HierExchange> inter_;
  std::unique_ptr<ShmAllReduce> shm_;
  std::atomic<uint64_t> logged_classes_{0};  // bit k: the 2^k-byte class was logged
  std::atomic<int> shared_pending_{0};  // shared ops in ops_
};

class UcxWork final : public Work {
 public:
  UcxWork(UcxCommunicator* comm, std::shared_ptr<PendingOp> op) : comm_(comm), op_(std::move(op)) {}
  absl::Status Wait(std::chrono::milliseconds timeout) override { return comm_->WaitFor(op_, timeout); }
  bool Done() override { return comm_->Poll(op_); }

 private:
  UcxCommunicator* comm_;  // not owned; outlives this Work
  std::shared_ptr<PendingOp> op_;
};

// The endpoint error callback; arg is the EpContext.
void OnEpError(void* arg, ucp_ep_h, ucs_status_t status);

// Closes `eps` (null entries skipped) with UCP_EP_CLOSE_FLAG_FORCE, driving
// `worker` a bounded number of times per endpoint: a peer that is gone
// cannot hold a destructor forever.
void CloseEndpoints(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps);

}  // namespace ucx_internal
}  // namespace athanor
