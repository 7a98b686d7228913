// The ucx backend's front (see ucx_communicator.h): bootstrap, the choice of
// path per call, and the order of tear-down. The paths own their state:
// TagSchedulePath (tag_schedule_path.h), SharedMemoryPath (shm_path.h) and
// HierarchicalPath (hier_path.h); the OpEngine (op_engine.h) runs their ops
// under one lock, PeerWatch (peer_watch.h) names dead peers, UcxWorker
// (ucx_worker.h) holds the UCP context, worker and endpoints.
#include "collectives/ucx/ucx_communicator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "collectives/blocking_hint.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/local_communicator.h"
#include "collectives/ucx/hier_path.h"
#include "collectives/ucx/op_engine.h"
#include "collectives/ucx/peer_watch.h"
#include "collectives/ucx/shm_path.h"
#include "collectives/ucx/tag_schedule_path.h"
#include "collectives/ucx/topology.h"
#include "collectives/ucx/ucx_worker.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {
namespace {

// The inode of this process's pid namespace ("" where /proc does not say).
std::string PidNamespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return "";
  return std::to_string(st.st_ino);
}

int SizeClass(size_t bytes) {
  int size_class = 0;
  while (size_class < 63 && (2ull << size_class) <= bytes) ++size_class;
  return size_class;
}

class UcxCommunicator final : public Communicator {
 public:
  explicit UcxCommunicator(const CommunicatorOptions& options) : options_(options) {}
  ~UcxCommunicator() override;
  absl::Status Init();

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  std::string backend() const override { return "ucx"; }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& options) override;
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& options) override {
    return tags_->ReduceScatter(send, recv, recv_count, type, op, options);
  }
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& options) override {
    return tags_->AllGather(send, recv, send_count, type, options);
  }
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& options) override;
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& options) override {
    return tags_->Barrier(options);
  }
  void Abort() override { engine_->Abort(); }

 private:
  // Where every rank lives; sets up the PeerWatch of this host's peers.
  absl::StatusOr<std::vector<bool>> MapPeers();
  // Logs, once per power-of-two size class, which all-reduce algorithm runs.
  void LogChoice(size_t bytes, const std::string& algorithm);
  bool ChoiceLogged(size_t bytes) const {
    return (logged_classes_.load(std::memory_order_relaxed) & (1ull << SizeClass(bytes))) != 0;
  }

  // Constant after Init().
  const CommunicatorOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  Topology topology_;
  std::unique_ptr<PeerWatch> peers_;
  std::unique_ptr<UcxWorker> ucx_;
  std::unique_ptr<OpEngine> engine_;
  std::unique_ptr<TagSchedulePath> tags_;
  std::unique_ptr<SharedMemoryPath> shm_;    // null: not every rank on this host, or off
  std::unique_ptr<HierarchicalPath> hier_;   // null: one host, or off
  bool started_ = false;  // Init() finished: every rank holds endpoints to us
  std::atomic<uint64_t> logged_classes_{0};  // bit k: the 2^k-byte class was logged
};

absl::StatusOr<std::vector<bool>> UcxCommunicator::MapPeers() {
  const auto& o = options_;
  // Where every rank lives: "<host identity> <pid namespace> <pid>".
  const std::string pid_ns = PidNamespace();
  ASSIGN_OR_RETURN(std::vector<std::string> hosts,
                   AllGatherThroughStore(store_.get(), "ucx/host", o.rank, o.world_size,
                                         absl::StrCat(HostIdentity(), " ", pid_ns, " ", getpid()),
                                         o.timeout));
  std::vector<std::string> identities;
  for (const std::string& h : hosts) identities.push_back(h.substr(0, h.find(' ')));
  topology_ = MakeTopology(identities);
  peers_ = std::make_unique<PeerWatch>(o.rank, o.world_size, o.ucx.watch_period);
  std::vector<bool> local(o.world_size, false);
  if (!o.ucx.watch_local_peers) return local;
  for (int peer = 0; peer < o.world_size; ++peer) {
    if (peer == o.rank) continue;
    // Same host and same pid namespace: its pid means the same process here.
    std::vector<std::string> fields = absl::StrSplit(hosts[peer], ' ');
    int pid = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[2], &pid) || pid <= 0) continue;
    if (topology_.host_of[peer] != topology_.host_of[o.rank] || fields[1] != pid_ns) continue;
    // A rank of this very process (ranks as threads) dies with us; another
    // process is watched through its pidfd, else left to UCX.
    local[peer] = pid == getpid() || peers_->Watch(peer, pid);
  }
  return local;
}

absl::Status UcxCommunicator::Init() {
  const auto& o = options_;
  const UcxTuning& t = o.ucx;
  if (o.rank == 0) {
    ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(o.master_addr, o.master_port,
                                                    {.secret = o.rendezvous_secret,
                                                     .listen_fd = o.rendezvous_listen_fd}));
  }
  ASSIGN_OR_RETURN(store_, TcpStoreClient::Connect(o.master_addr, o.master_port, o.timeout,
                                                   o.rendezvous_secret));
  UcxWorker::Options wo;
  ASSIGN_OR_RETURN(wo.local_peers, MapPeers());
  wo.rank = o.rank;
  wo.world_size = o.world_size;
  wo.timeout = o.timeout;
  wo.keepalive_interval = t.keepalive_interval;
  // Memory keys for the shared-memory and hierarchical all-reduces.
  wo.rma = t.shared_memory && o.world_size > 1 &&
           (topology_.num_hosts() == 1 || (t.hierarchical && topology_.max_local > 1));
  // The progress thread sleeps on the worker's event fd.
  wo.wakeup = t.progress_thread && o.world_size > 1;
  ASSIGN_OR_RETURN(ucx_, UcxWorker::Create(wo, store_.get(), peers_.get()));

  OpEngine::Options eo;
  eo.rank = o.rank;
  eo.worker = ucx_->worker();
  eo.peers = peers_.get();
  eo.oversubscribed =
      peers_->num_watched() + 1 > std::max(1u, std::thread::hardware_concurrency());
  eo.wait_nap_us = t.wait_nap_us;
  eo.on_done = t.on_done;
  engine_ = std::make_unique<OpEngine>(eo);
  tags_ = std::make_unique<TagSchedulePath>(engine_.get(), ucx_.get(), o.rank, o.world_size, t);
  ASSIGN_OR_RETURN(shm_, SharedMemoryPath::Create(engine_.get(), *ucx_, store_.get(), topology_, o));
  ASSIGN_OR_RETURN(hier_,
                   HierarchicalPath::Create(engine_.get(), *ucx_, store_.get(), &topology_, o));
  if (wo.wakeup) RETURN_IF_ERROR(engine_->StartProgressThread());
  started_ = true;
  return absl::OkStatus();
}

UcxCommunicator::~UcxCommunicator() {
  // Before the closing barrier: a peer leaving after it is no error.
  if (engine_ != nullptr) engine_->StopProgressThread();
  bool healthy = false;
  if (engine_ != nullptr) {
    StdMutexLock lock(&engine_->mu());
    healthy = engine_->error().ok() && peers_->error().ok();
  }
  if (healthy && started_) {
    // Nobody closes an endpoint while a peer may still read from it.
    auto n = store_->Add("ucx/finished", 1);
    if (n.ok() && *n == options_.world_size) (void)store_->Set("ucx/finished/all", "1");
    if (n.ok()) (void)store_->Get("ucx/finished/all", options_.timeout);
  }
  if (engine_ != nullptr) {
    StdMutexLock lock(&engine_->mu());
    // Where a failed call left UCX requests into its caller's buffers, the
    // engine halted before the call returned, and the caller may have freed
    // them since: from then on nothing here progresses the worker.
    engine_->FailAndSettle(absl::AbortedError("communicator destroyed"));
    if (shm_ != nullptr) shm_->ReleaseKeys();
    if (hier_ != nullptr) hier_->ReleaseKeys();
    ucx_->CloseEndpoints(/*progress=*/!engine_->halted());
    // An op UCX still holds requests of (a rendezvous send nobody matched,
    // anything left in flight when the engine halted) is leaked rather than
    // freed under a late callback.
    engine_->LeakUnsettled();
    if (hier_ != nullptr) hier_->DropExchange();
  }
  if (ucx_ != nullptr) ucx_->DestroyWorker();
  // The segments before the context (ucp_cleanup, in ~UcxWorker).
  shm_.reset();
  hier_.reset();
  ucx_.reset();
  engine_.reset();
  tags_.reset();  // its scratch: after the worker, which no longer writes there
  peers_.reset();
  store_.reset();
  if (server_ != nullptr) {
    server_->Drain(std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(10)));
  }
  server_.reset();
}

void UcxCommunicator::LogChoice(size_t bytes, const std::string& algorithm) {
  const int size_class = SizeClass(bytes);
  const uint64_t bit = 1ull << size_class;
  // Once per class: the common case is one relaxed load, no lock.
  if ((logged_classes_.load(std::memory_order_relaxed) & bit) != 0) return;
  if ((logged_classes_.fetch_or(bit, std::memory_order_relaxed) & bit) != 0) return;
  ATHANOR_LOG(DEBUG) << "ucx: rank " << options_.rank << ": all-reduces of " << (1ull << size_class)
                     << "-" << ((2ull << size_class) - 1) << " B run " << algorithm;
}

// The path depends only on the call (never on timing or load), so every
// rank takes the same one and blocking and async calls always pair up.
std::unique_ptr<Work> UcxCommunicator::AllReduceAsync(const void* send, void* recv, size_t count,
                                                      DataType type, ReduceOp op,
                                                      const CollectiveOptions& options) {
  const int n = options_.world_size;
  const size_t bytes = count * DataTypeSize(type);
  if (shm_ != nullptr && count >= static_cast<size_t>(n) && shm_->Use(bytes)) {
    LogChoice(bytes, "through shared memory");
    return shm_->AllReduce(send, recv, count, type, op, options);
  }
  if (hier_ != nullptr && count > 0 && hier_->Use(bytes)) {
    if (!ChoiceLogged(bytes)) LogChoice(bytes, hier_->Describe(bytes));
    return hier_->AllReduce(send, recv, count, type, op, options);
  }
  const size_t small_bytes = options_.ucx.small_bytes;
  if (n == 2 && count > 0 && bytes <= small_bytes && collectives_internal::InBlockingCall()) {
    if (auto work = tags_->PairAllReduce(send, recv, count, type, op, options)) return work;
  }
  if (bytes <= small_bytes || count < static_cast<size_t>(n)) {
    LogChoice(bytes, "recursive doubling over tag messages");
    return tags_->RecursiveDoubling(send, recv, count, type, op, options);
  }
  LogChoice(bytes, "the flat ring over tag messages");
  return tags_->Ring(send, recv, count, type, op, options);
}

std::unique_ptr<Work> UcxCommunicator::BroadcastAsync(void* buffer, size_t count, DataType type,
                                                      int root, const CollectiveOptions& options) {
  if (root < 0 || root >= options_.world_size) {
    return MakeDoneWork(absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is not a rank of ", options_.world_size)));
  }
  return tags_->Broadcast(buffer, count, type, root, options);
}

}  // namespace
}  // namespace ucx_internal

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    const CommunicatorOptions& options) {
  auto comm = std::make_unique<ucx_internal::UcxCommunicator>(options);
  absl::Status status = comm->Init();
  if (!status.ok()) {
    ATHANOR_LOG(ERROR) << "rank " << options.rank << ": ucx communicator: " << status.message();
    return status;
  }
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace athanor
