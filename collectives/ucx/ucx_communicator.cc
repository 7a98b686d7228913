#include "collectives/ucx/ucx_communicator.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_split.h"
#include "collectives/blocking_hint.h"
#include "collectives/local_communicator.h"
#include "collectives/ucx/ucx_internal.h"
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

}  // namespace

absl::Status UcxCommunicator::Init() {
  const auto& o = options_;
  if (o.rank == 0) {
    ASSIGN_OR_RETURN(server_, TcpStoreServer::Start(o.master_addr, o.master_port));
  }
  ASSIGN_OR_RETURN(store_, TcpStoreClient::Connect(o.master_addr, o.master_port, o.timeout));

  // Where every rank lives: "<host identity> <pid namespace> <pid>".
  const std::string pid_ns = PidNamespace();
  ASSIGN_OR_RETURN(std::vector<std::string> hosts,
                   AllGatherThroughStore(store_.get(), "ucx/host", o.rank, o.world_size,
                                         absl::StrCat(HostIdentity(), " ", pid_ns, " ", getpid()),
                                         o.timeout));
  std::vector<std::string> identities;
  for (const std::string& h : hosts) identities.push_back(h.substr(0, h.find(' ')));
  topology_ = MakeTopology(identities);
  const bool all_local = topology_.num_hosts() == 1;
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcsError("ucp_config_read", s);
  // Settings go through the config object, never the process environment
  // (setenv races with every other thread's getenv). UCX's own variables
  // win over our defaults.
  // Larger shared-memory FIFO cells: messages up to ~256 B go in one cell
  // (eager short) instead of a bounce buffer, ~0.2 us less per small call.
  // UCX applies names it does not know at the UCP level to every transport
  // that has them ("MM_" covers both sysv and posix).
  if (std::getenv("UCX_SYSV_FIFO_ELEM_SIZE") == nullptr &&
      std::getenv("UCX_POSIX_FIFO_ELEM_SIZE") == nullptr &&
      std::getenv("UCX_MM_FIFO_ELEM_SIZE") == nullptr) {
    s = ucp_config_modify(config, "MM_FIFO_ELEM_SIZE", "320");
    if (s != UCS_OK) ATHANOR_LOG(DEBUG) << "ucx: MM_FIFO_ELEM_SIZE: " << ucs_status_string(s);
  }
  if (!tuning_.keepalive_interval.empty() && std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    ucp_config_modify(config, "KEEPALIVE_INTERVAL", tuning_.keepalive_interval.c_str());
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  // Memory keys for the shared-memory and hierarchical all-reduces (ucx_shm.cc).
  if (tuning_.shared_memory && o.world_size > 1 &&
      (all_local || (tuning_.hierarchical && topology_.max_local > 1))) {
    params.features |= UCP_FEATURE_RMA;
  }
  // The progress thread sleeps on the worker's event fd.
  if (tuning_.progress_thread && o.world_size > 1) params.features |= UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return UcsError("ucp_init", s);
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(context_, &wparams, &worker_);
  if (s != UCS_OK) return UcsError("ucp_worker_create", s);
  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  s = ucp_worker_get_address(worker_, &address, &address_len);
  if (s != UCS_OK) return UcsError("ucp_worker_get_address", s);
  std::string mine(reinterpret_cast<const char*>(address), address_len);
  ucp_worker_release_address(worker_, address);

  ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                   AllGatherThroughStore(store_.get(), "ucx/address", o.rank, o.world_size, mine,
                                         o.timeout));
  eps_.assign(o.world_size, nullptr);
  for (int peer = 0; peer < o.world_size; ++peer) {
    if (peer == o.rank) continue;
    // UCX 1.13's shared-memory transports cannot report a dead peer, and
    // asking for peer error handling drops them (leaving TCP). For peers on
    // this host we keep shared memory and watch the peer's process instead.
    bool local = false;
    if (tuning_.watch_local_peers) {
      // Same host and same pid namespace: its pid means the same process here.
      std::vector<std::string> fields = absl::StrSplit(hosts[peer], ' ');
      int pid = fields.size() == 3 ? std::atoi(fields[2].c_str()) : 0;
      local = fields.size() == 3 && topology_.host_of[peer] == topology_.host_of[o.rank] &&
              fields[1] == pid_ns && pid > 0;
      if (local && pid != getpid()) {
        int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
        if (fd >= 0) {
          peer_watch_.push_back({peer, pid, fd});
        } else {
          local = false;  // cannot watch it: fall back to UCX peer error handling
        }
      }
    }
    ep_contexts_.push_back(std::make_unique<EpContext>(EpContext{this, peer}));
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    ep.err_mode = local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = OnEpError;
    ep.err_handler.arg = ep_contexts_.back().get();
    s = ucp_ep_create(worker_, &ep, &eps_[peer]);
    if (s != UCS_OK) return UcsError(absl::StrCat("ucp_ep_create to rank ", peer), s);
  }
  oversubscribed_ = peer_watch_.size() + 1 > std::max(1u, std::thread::hardware_concurrency());
  RETURN_IF_ERROR(Hello());
  LogTransports();
  RETURN_IF_ERROR(SetUpShared());
  if (tuning_.progress_thread && o.world_size > 1) RETURN_IF_ERROR(StartProgressThread());
  started_ = true;
  return absl::OkStatus();
}

// One empty message to and from every peer, so every endpoint is wired up
// (and watched for errors) before the first collective.
absl::Status UcxCommunicator::Hello() {
  const int n = options_.world_size, r = options_.rank;
  std::vector<void*> requests;
  ucp_request_param_t param{};
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    ucs_status_ptr_t rp = ucp_tag_recv_nbx(worker_, nullptr, 0, MakeTag(kHelloTagBase, peer, 0, 0),
                                           kFullMask, &param);
    ucs_status_ptr_t sp = ucp_tag_send_nbx(eps_[peer], nullptr, 0, MakeTag(kHelloTagBase, r, 0, 0),
                                           &param);
    for (ucs_status_ptr_t p : {rp, sp}) {
      if (UCS_PTR_IS_ERR(p)) return UcsError(absl::StrCat("hello to rank ", peer), UCS_PTR_STATUS(p));
      if (p != nullptr) requests.push_back(p);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  absl::Status status;
  while (!requests.empty()) {
    StdMutexLock lock(&mu_);
    ucp_worker_progress(worker_);
    for (size_t i = 0; i < requests.size();) {
      ucs_status_t st = ucp_request_check_status(requests[i]);
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      if (st != UCS_OK && status.ok()) status = UcsError("ucx hello", st);
      ucp_request_free(requests[i]);
      requests.erase(requests.begin() + i);
    }
    if (!peer_error_.ok()) status = peer_error_;
    if (status.ok() && std::chrono::steady_clock::now() > deadline) {
      status = absl::DeadlineExceededError("ucx: peers did not answer the start-up hello");
    }
    if (!status.ok()) {
      for (void* req : requests) ucp_request_cancel(worker_, req);
      if (!peer_error_.ok()) return status;
    }
  }
  return status;
}

std::string UcxCommunicator::Lanes(int peer) const {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return "";
  ucp_ep_print_info(eps_[peer], f);
  fclose(f);
  std::string lanes;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text, len), '\n')) {
    if (line.find("lane[") == absl::string_view::npos) continue;
    size_t at = line.find("lane[");
    absl::StrAppend(&lanes, lanes.empty() ? "" : "; ", line.substr(at));
  }
  free(text);
  return lanes;
}

void UcxCommunicator::LogTransports() {
  int right = (options_.rank + 1) % options_.world_size;
  const std::string lanes = Lanes(right);
  if (options_.rank == 0) {
    ATHANOR_LOG(INFO) << "ucx: rank 0 -> rank " << right << " transports: " << lanes;
  } else {
    ATHANOR_LOG(DEBUG) << "ucx: rank " << options_.rank << " -> rank " << right
                       << " transports: " << lanes;
  }
}

UcxCommunicator::~UcxCommunicator() {
  // Before the closing barrier: a peer leaving after it is no error.
  StopProgressThread();
  bool healthy;
  {
    StdMutexLock lock(&mu_);
    healthy = error_.ok() && peer_error_.ok();
  }
  if (healthy && started_) {
    // Nobody closes an endpoint while a peer may still read from it.
    auto n = store_->Add("ucx/finished", 1);
    if (n.ok() && *n == options_.world_size) (void)store_->Set("ucx/finished/all", "1");
    if (n.ok()) (void)store_->Get("ucx/finished/all", options_.timeout);
  }
  if (worker_ != nullptr) {
    StdMutexLock lock(&mu_);
    if (hier_on_ && shm_->phase_times().ops > 0) {
      const auto& t = shm_->phase_times();
      ATHANOR_LOG(DEBUG) << "ucx: rank " << options_.rank << ": " << t.ops
                         << " hierarchical all-reduces took " << t.wall
                         << " s: on this host copying and reducing " << t.local
                         << " s, scaling, copying out and gathering " << t.out
                         << " s; between hosts (chunks overlapping) " << t.exchange << " s";
    }
    FailAll(absl::AbortedError("communicator destroyed"));
    for (int i = 0; i < 1000 && !ops_.empty(); ++i) ProgressLocked();
    TearDownShared();
    CloseEndpoints(worker_, eps_);
    // An operation UCX still holds requests of (a rendezvous send nobody
    // matched) is leaked rather than freed under a late callback.
    for (auto& op : ops_) {
      if (op->outstanding > 0) new std::shared_ptr<PendingOp>(op);
    }
    ops_.clear();
    inter_.reset();
    ucp_worker_destroy(worker_);
  }
  shm_.reset();
  if (context_ != nullptr) ucp_cleanup(context_);
  for (const auto& w : peer_watch_) close(w.pidfd);
  {
    StdMutexLock lock(&mu_);
    for (char* p : all_scratch_) free(p);
  }
  store_.reset();
  if (server_ != nullptr) {
    server_->Drain(std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(10)));
  }
  server_.reset();
}

void UcxCommunicator::OnPeerError(int peer, ucs_status_t status) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Runs inside ucp_worker_progress, which is only called with mu_ held.
  if (!peer_error_.ok()) return;
  // With UCP_FEATURE_WAKEUP, shared memory reports a peer that closed its
  // endpoints (a neighbour failing on its own error). Blame the rank that
  // actually died when a watched one did.
  CheckPeersLocked();
  if (!peer_error_.ok()) return;
  absl::Status error = absl::UnavailableError(absl::StrCat(
      "ucx: peer rank ", peer, " failed or is unreachable (", ucs_status_string(status), ")"));
  for (const auto& w : peer_watch_) {
    if (w.rank != peer) continue;
    // A watched peer: its process may still be exiting (its pidfd not yet
    // readable) or it closed on someone else's death. Give the pidfds
    // kDeferPeerError to name the dead rank first (ProgressLocked).
    if (deferred_peer_error_.ok()) {
      deferred_peer_error_ = error;
      deferred_since_ = std::chrono::steady_clock::now();
    }
    return;
  }
  peer_error_ = error;
  ATHANOR_LOG(ERROR) << "rank " << options_.rank << ": " << peer_error_.message();
}

ScheduleParams UcxCommunicator::Params(DataType type, ReduceOp op, size_t block_bytes) {
  ScheduleParams p;
  p.rank = options_.rank;
  p.world_size = options_.world_size;
  p.type = type;
  p.op = op;
  p.window = tuning_.window;
  p.segment_bytes = tuning_.segment_bytes;
  p.segment_bytes = SegmentBytesFor(block_bytes, p);
  return p;
}

template <typename Build>
std::unique_ptr<Work> UcxCommunicator::Submit(ScheduleParams params, size_t scratch_bytes,
                                              DataType type, ReduceOp op, const char* what,
                                              const CollectiveOptions& options, Build build) {
  auto pending = std::make_shared<PendingOp>();
  pending->type = type;
  pending->op = op;
  pending->kind = what;
  pending->user_tag = options.tag;
  pending->deadline = std::chrono::steady_clock::now() + options.timeout;
  StdMutexLock lock(&mu_);
  if (!error_.ok()) return MakeDoneWork(error_);
  if (scratch_bytes > 0) {
    params.scratch = pending->scratch = AcquireScratch(scratch_bytes);
    pending->scratch_bytes = scratch_bytes;
  }
  pending->schedule = build(params);
  uint32_t seq = sequence_[options.tag]++;
  pending->tag_base = ((options.tag & 0xFFFFFull) << 44) | (static_cast<uint64_t>(seq & 0xFF) << 36);
  const Schedule& sc = pending->schedule;
  if (sc.pre_copy_bytes > 0) std::memmove(sc.pre_copy_dst, sc.pre_copy_src, sc.pre_copy_bytes);
  pending->chains.resize(sc.chains.size());
  for (size_t j = 0; j < sc.chains.size(); ++j) {
    pending->chains[j].op = pending.get();
    pending->chains[j].index = j;
  }
  ops_.push_back(pending);
  num_ops_.store(ops_.size(), std::memory_order_release);
  Advance(pending.get());
  // A blocking call's thread progresses it right away in Wait.
  if (!pending->finished && !collectives_internal::InBlockingCall()) WakeLocked();
  return std::make_unique<UcxWork>(this, pending);
}


std::unique_ptr<Work> UcxCommunicator::AllReduceAsync(const void* send, void* recv, size_t count,
                                                      DataType type, ReduceOp op,
                                                      const CollectiveOptions& options) {
  const int n = options_.world_size;
  const size_t bytes = count * DataTypeSize(type);
  if (count >= static_cast<size_t>(n) && UseShared(bytes)) {
    LogChoice(bytes, "through shared memory");
    return SharedAllReduce(send, recv, count, type, op, options);
  }
  if (count > 0 && UseHierarchical(bytes)) {
    if (!ChoiceLogged(bytes)) {
      LogChoice(bytes, absl::StrCat("hierarchically (shared memory on each host, blocks exchanged "
                                    "between hosts over ",
                                    inter_->has_links() ? "TCP sockets" : "UCX", ": ",
                                    inter_->AlgorithmFor(bytes), ")")
                           .c_str());
    }
    return SharedAllReduce(send, recv, count, type, op, options);
  }
  if (n == 2 && count > 0 && bytes <= tuning_.small_bytes && collectives_internal::InBlockingCall()) {
    if (auto work = PairAllReduce(send, recv, count, type, op, options)) return work;
  }
  if (bytes <= tuning_.small_bytes || count < static_cast<size_t>(n)) {
    LogChoice(bytes, "recursive doubling over tag messages");
    return Submit(Params(type, op, bytes), std::max<size_t>(bytes, 64), type, op, "all-reduce",
                  options, [&](const ScheduleParams& p) {
                    return RecursiveDoublingAllReduce(p, send, recv, count);
                  });
  }
  LogChoice(bytes, "the flat ring over tag messages");
  ScheduleParams p = Params(type, op, bytes / n + DataTypeSize(type));
  const char* s = static_cast<const char*>(send);
  const char* d = static_cast<const char*>(recv);
  const bool overlap = s < d + bytes && d < s + bytes;
  return Submit(p, overlap ? ScratchBytes(p) : 0, type, op, "all-reduce", options,
                [&](const ScheduleParams& p) { return RingAllReduce(p, send, recv, count); });
}

std::unique_ptr<Work> UcxCommunicator::ReduceScatterAsync(const void* send, void* recv,
                                                          size_t recv_count, DataType type,
                                                          ReduceOp op,
                                                          const CollectiveOptions& options) {
  ScheduleParams p = Params(type, op, recv_count * DataTypeSize(type));
  return Submit(p, ScratchBytes(p), type, op, "reduce-scatter", options,
                [&](const ScheduleParams& p) { return RingReduceScatter(p, send, recv, recv_count); });
}

std::unique_ptr<Work> UcxCommunicator::AllGatherAsync(const void* send, void* recv,
                                                      size_t send_count, DataType type,
                                                      const CollectiveOptions& options) {
  return Submit(Params(type, ReduceOp::kSum, send_count * DataTypeSize(type)), 0, type,
                ReduceOp::kSum, "all-gather", options,
                [&](const ScheduleParams& p) { return RingAllGather(p, send, recv, send_count); });
}

std::unique_ptr<Work> UcxCommunicator::BroadcastAsync(void* buffer, size_t count, DataType type,
                                                      int root, const CollectiveOptions& options) {
  if (root < 0 || root >= options_.world_size) {
    return MakeDoneWork(absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " is not a rank of ", options_.world_size)));
  }
  return Submit(Params(type, ReduceOp::kSum, count * DataTypeSize(type)), 0, type, ReduceOp::kSum,
                "broadcast", options,
                [&](const ScheduleParams& p) { return ChainBroadcast(p, buffer, count, root); });
}

std::unique_ptr<Work> UcxCommunicator::BarrierAsync(const CollectiveOptions& options) {
  return Submit(Params(DataType::kI32, ReduceOp::kSum, 0), 0, DataType::kI32, ReduceOp::kSum,
                "barrier", options, [](const ScheduleParams& p) { return DisseminationBarrier(p); });
}

}  // namespace ucx_internal

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(
    const CommunicatorOptions& options, const UcxTuning& tuning) {
  UcxTuning t = tuning;
  // Experiment knobs for benchmarks (bytes, chains in flight).
  if (const char* v = std::getenv("ATHANOR_UCX_SEGMENT_BYTES")) t.segment_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_WINDOW")) t.window = std::atoi(v);
  if (const char* v = std::getenv("ATHANOR_UCX_SMALL_BYTES")) t.small_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_PROGRESS_THREAD")) t.progress_thread = std::atoi(v) != 0;
  if (const char* v = std::getenv("ATHANOR_UCX_SHARED")) t.shared_memory = std::atoi(v) != 0;
  if (const char* v = std::getenv("ATHANOR_UCX_SHARED_MIN_BYTES")) t.shared_min_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_SHARED_CHUNK_BYTES")) t.shared_chunk_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_SHARED_SLOTS")) t.shared_slots = std::atoi(v);
  if (const char* v = std::getenv("ATHANOR_UCX_SHARED_ONE_SHOT_BYTES")) t.shared_one_shot_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL")) t.hierarchical = std::atoi(v) != 0;
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL_CHUNK_BYTES")) t.hierarchical_chunk_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL_RING_MIN_BYTES")) t.hierarchical_ring_min_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL_SLOTS")) t.hierarchical_slots = std::atoi(v);
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL_SOCKETS")) t.hierarchical_sockets = std::atoi(v) != 0 ? 1 : 0;
  if (const char* v = std::getenv("ATHANOR_UCX_WAIT_NAP_US")) t.wait_nap_us = std::atoi(v);
  if (const char* v = std::getenv("ATHANOR_UCX_HIERARCHICAL_MIN_BYTES")) t.hierarchical_min_bytes = std::strtoull(v, nullptr, 10);
  auto comm = std::make_unique<ucx_internal::UcxCommunicator>(options, t);
  absl::Status status = comm->Init();
  if (!status.ok()) {
    ATHANOR_LOG(ERROR) << "rank " << options.rank << ": ucx communicator: " << status.message();
    return status;
  }
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace athanor
