// The ucx backend's glue to ShmAllReduce (shm_all_reduce.h): setting it up
// over this host's ranks, choosing it per call, and running its ops among
// the communicator's pending operations. The algorithm itself lives in
// shm_all_reduce.cc, the stage between hosts in hier_exchange.cc.
#include <cstring>

#include "collectives/blocking_hint.h"
#include "collectives/local_communicator.h"
#include "collectives/ucx/ucx_internal.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

absl::Status UcxCommunicator::SetUpShared() {
  const int n = options_.world_size, r = options_.rank;
  const bool several_hosts = topology_.num_hosts() > 1;
  if (!tuning_.shared_memory || n < 2) return absl::OkStatus();
  // Across hosts only where some host has several ranks (else the flat
  // ring moves the same bytes).
  if (several_hosts && (!tuning_.hierarchical || topology_.max_local < 2)) {
    return absl::OkStatus();
  }
  const std::vector<int>& members = topology_.host_ranks(r);
  ShmAllReduce::Options so;
  so.index = topology_.local_index[r];
  so.ranks = members;
  for (int q : members) so.eps.push_back(q == r ? nullptr : eps_[q]);
  so.chunk_bytes = tuning_.shared_chunk_bytes;
  so.slots = tuning_.shared_slots;
  so.one_shot_bytes = tuning_.shared_one_shot_bytes;
  if (several_hosts) {
    inter_ = std::make_unique<HierExchange>(worker_, &eps_, &topology_, r);
    so.blocks = topology_.max_local;
    so.world_size = n;
    so.follows_order = topology_.host_of[r] != 0;
    so.chunk_bytes = tuning_.hierarchical_chunk_bytes;
    so.slots = tuning_.hierarchical_slots;
    so.inter = inter_.get();
    inter_->SetRingMinBytes(tuning_.hierarchical_ring_min_bytes);
  }
  ASSIGN_OR_RETURN(shm_, ShmAllReduce::Create(context_, so, store_.get(),
                                              absl::StrCat("ucx/shm/", topology_.host_of[r]),
                                              options_.timeout));
  // Every rank must take the same path for the same call: all agree, and
  // across hosts the chunks must be cut alike.
  const std::string mine = shm_->why_not().empty()
                               ? absl::StrCat("ok ", shm_->chunk_bytes(), " ", shm_->slots())
                               : shm_->why_not();
  ASSIGN_OR_RETURN(std::vector<std::string> verdicts,
                   AllGatherThroughStore(store_.get(), "ucx/shm/ok", r, n, mine, options_.timeout));
  std::string why_not;
  for (int q = 0; q < n && why_not.empty(); ++q) {
    if (verdicts[q] != verdicts[0]) {
      why_not = absl::StrCat("rank ", q, ": ", verdicts[q], "; rank 0: ", verdicts[0]);
    }
  }
  if (why_not.empty() && verdicts[0].rfind("ok ", 0) != 0) why_not = verdicts[0];
  if (!why_not.empty()) {
    shm_.reset();
    inter_.reset();
    if (r == 0) ATHANOR_LOG(INFO) << "ucx: no shared-memory all-reduce: " << why_not;
    return absl::OkStatus();
  }
  shared_on_ = !several_hosts;
  hier_on_ = several_hosts;
  std::string data_path = "UCX tag messages";
  if (hier_on_ && tuning_.hierarchical_sockets != 0) {
    // Automatic: sockets only where UCX would cross hosts over TCP itself
    // (no verbs lane to the ranks this one exchanges with).
    const std::vector<int> peers = HierExchange::LinkPeers(topology_, r);
    bool offer = true;
    if (tuning_.hierarchical_sockets < 0) {
      for (int p : peers) {
        const std::string lanes = Lanes(p);
        if (lanes.find("tcp/") == std::string::npos || lanes.find("_mlx5") != std::string::npos ||
            lanes.find("_verbs") != std::string::npos) {
          offer = false;
          ATHANOR_LOG(DEBUG) << "ucx: rank " << r << ": UCX reaches rank " << p
                             << " by more than TCP (" << lanes << "); blocks cross over UCX";
        }
      }
    }
    // Every rank takes part (the set-up all-gathers), linked or not.
    ASSIGN_OR_RETURN(std::unique_ptr<SocketLinks> links,
                     SocketLinks::Create(store_.get(), "ucx/hier/links", r, n, peers,
                                         options_.master_addr, options_.master_port,
                                         options_.timeout, offer));
    if (links != nullptr) {
      inter_->SetLinks(std::move(links));
      data_path = "TCP sockets";
    } else if (r == 0) {
      ATHANOR_LOG(INFO) << "ucx: some rank reaches its peers on other hosts by RDMA or has no "
                           "IPv4 address towards rank 0; blocks cross hosts over UCX";
    }
  }
  if (r != 0) return absl::OkStatus();
  if (shared_on_) {
    const size_t from = n > 2 ? tuning_.shared_min_bytes
                              : std::max(tuning_.shared_min_bytes, tuning_.small_bytes + 1);
    ATHANOR_LOG(INFO) << "ucx: all " << n << " ranks on this host; all-reduces from " << from
                      << " B go through shared memory (" << shm_->slots() << " slots of "
                      << shm_->chunk_bytes() << " B per rank)";
  } else {
    ATHANOR_LOG(INFO) << "ucx: ranks on " << topology_.num_hosts() << " hosts ("
                      << topology_.Layout() << "); all-reduces from "
                      << tuning_.hierarchical_min_bytes
                      << " B are hierarchical (shared memory on each host, "
                      << topology_.max_local << " blocks per " << shm_->chunk_bytes()
                      << " B chunk exchanged between hosts over " << data_path
                      << (topology_.num_hosts() > 2
                              ? absl::StrCat("; by a ring from ", tuning_.hierarchical_ring_min_bytes,
                                             " B, by a direct exchange below")
                              : std::string())
                      << ")";
  }
  return absl::OkStatus();
}

void UcxCommunicator::TearDownShared() {
  if (shm_ != nullptr) shm_->ReleaseKeys();
}

bool UcxCommunicator::UseShared(size_t bytes) const {
  // The same answer on every rank (it depends only on the call), so blocking
  // and async calls of different ranks always pair up.
  return shared_on_ && bytes >= tuning_.shared_min_bytes &&
         (options_.world_size > 2 || bytes > tuning_.small_bytes);
}

bool UcxCommunicator::UseHierarchical(size_t bytes) const {
  return hier_on_ && bytes >= tuning_.hierarchical_min_bytes;
}

namespace {

int SizeClass(size_t bytes) {
  int size_class = 0;
  while (size_class < 63 && (2ull << size_class) <= bytes) ++size_class;
  return size_class;
}

}  // namespace

bool UcxCommunicator::ChoiceLogged(size_t bytes) const {
  return (logged_classes_.load(std::memory_order_relaxed) & (1ull << SizeClass(bytes))) != 0;
}

void UcxCommunicator::LogChoice(size_t bytes, const char* algorithm) {
  const int size_class = SizeClass(bytes);
  const uint64_t bit = 1ull << size_class;
  // Once per class: the common case is one relaxed load, no lock.
  if ((logged_classes_.load(std::memory_order_relaxed) & bit) != 0) return;
  if ((logged_classes_.fetch_or(bit, std::memory_order_relaxed) & bit) != 0) return;
  ATHANOR_LOG(DEBUG) << "ucx: rank " << options_.rank << ": all-reduces of " << (1ull << size_class)
                     << "-" << ((2ull << size_class) - 1) << " B run " << algorithm;
}

std::unique_ptr<Work> UcxCommunicator::SharedAllReduce(const void* send, void* recv, size_t count,
                                                       DataType type, ReduceOp op,
                                                       const CollectiveOptions& options) {
  auto pending = std::make_shared<PendingOp>();
  pending->type = type;
  pending->op = op;
  pending->kind = "all-reduce";
  pending->user_tag = options.tag;
  pending->deadline = std::chrono::steady_clock::now() + options.timeout;
  auto shared = std::make_unique<ShmOp>();
  shared->send = static_cast<const char*>(send);
  shared->recv = static_cast<char*>(recv);
  shared->count = count;
  shared->type = type;
  shared->op = op;
  shared->user_tag = options.tag;
  StdMutexLock lock(&mu_);
  if (!error_.ok()) return MakeDoneWork(error_);
  if (hier_on_) {
    // Tags of its messages between hosts, numbered as the tag-message paths do.
    uint32_t seq = sequence_[options.tag]++;
    shared->net_tag = ((options.tag & 0xFFFFFull) << 44) | (static_cast<uint64_t>(seq & 0xFF) << 36);
  }
  absl::Status s = shm_->Submit(shared.get());
  if (!s.ok()) {
    error_ = s;
    return MakeDoneWork(error_);
  }
  pending->shared = std::move(shared);
  ops_.push_back(pending);
  num_ops_.store(ops_.size(), std::memory_order_release);
  shared_pending_.fetch_add(1, std::memory_order_acq_rel);
  Advance(pending.get());
  if (!pending->finished && !collectives_internal::InBlockingCall()) WakeLocked();
  return std::make_unique<UcxWork>(this, pending);
}

void UcxCommunicator::AdvanceShared(PendingOp* op) {
  absl::StatusOr<bool> done = shm_->Advance(op->shared.get());
  if (!done.ok()) {
    if (error_.ok()) error_ = done.status();
    return Fail(op, error_);
  }
  if (*done) op->finished = true;
}

}  // namespace ucx_internal
}  // namespace athanor
