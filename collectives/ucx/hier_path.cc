#include "collectives/ucx/hier_path.h"

#include "absl/strings/str_cat.h"
#include "collectives/ucx/socket_links.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {

absl::StatusOr<std::unique_ptr<HierarchicalPath>> HierarchicalPath::Create(
    OpEngine* engine, const UcxWorker& ucx, TcpStoreClient* store, const Topology* topology,
    const CommunicatorOptions& o) {
  const UcxTuning& t = o.ucx;
  const int n = o.world_size, r = o.rank;
  // Only where some host has several ranks (else the flat ring moves the
  // same bytes).
  if (!t.shared_memory || !t.hierarchical || n < 2 || topology->num_hosts() < 2 ||
      topology->max_local < 2) {
    return nullptr;
  }
  std::unique_ptr<HierarchicalPath> path(new HierarchicalPath(engine, r, t.hierarchical_min_bytes));
  path->inter_ = std::make_unique<HierExchange>(ucx.worker(), &ucx.eps(), topology, r);
  path->inter_->SetRingMinBytes(t.hierarchical_ring_min_bytes);
  ShmAllReduce::Options so;
  so.index = topology->local_index[r];
  so.ranks = topology->host_ranks(r);
  for (int q : so.ranks) so.eps.push_back(q == r ? nullptr : ucx.ep(q));
  so.one_shot_bytes = t.shared_one_shot_bytes;
  so.blocks = topology->max_local;
  so.world_size = n;
  so.follows_order = topology->host_of[r] != 0;
  so.chunk_bytes = t.hierarchical_chunk_bytes;
  so.slots = t.hierarchical_slots;
  so.inter = path->inter_.get();
  std::string why_not;
  ASSIGN_OR_RETURN(path->shm_,
                   CreateAgreedShm(ucx.context(), so, store,
                                   absl::StrCat("ucx/shm/", topology->host_of[r]), r, n, o.timeout,
                                   &why_not));
  if (path->shm_ == nullptr) {
    if (r == 0) ATHANOR_LOG(INFO) << "ucx: no shared-memory all-reduce: " << why_not;
    return nullptr;
  }
  std::string data_path = "UCX tag messages";
  if (t.hierarchical_sockets != 0) {
    // Automatic: sockets only where UCX would cross hosts over TCP itself
    // (no verbs lane to the ranks this one exchanges with).
    const std::vector<int> peers = HierExchange::LinkPeers(*topology, r);
    bool offer = true;
    if (t.hierarchical_sockets < 0) {
      for (int p : peers) {
        const std::string lanes = ucx.Lanes(p);
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
                     SocketLinks::Create(store, "ucx/hier/links", r, n, peers, o.master_addr,
                                         o.master_port, o.timeout, offer, t.socket_buffer_bytes));
    if (links != nullptr) {
      path->inter_->SetLinks(std::move(links));
      data_path = "TCP sockets";
    } else if (r == 0) {
      ATHANOR_LOG(INFO) << "ucx: some rank reaches its peers on other hosts by RDMA or has no "
                           "IPv4 address towards rank 0; blocks cross hosts over UCX";
    }
  }
  HierExchange* inter = path->inter_.get();
  engine->SetSweep([inter] { inter->Sweep(); });
  if (r == 0) {
    ATHANOR_LOG(INFO) << "ucx: ranks on " << topology->num_hosts() << " hosts ("
                      << topology->Layout() << "); all-reduces from " << t.hierarchical_min_bytes
                      << " B are hierarchical (shared memory on each host, "
                      << topology->max_local << " blocks per " << path->shm_->chunk_bytes()
                      << " B chunk exchanged between hosts over " << data_path
                      << (topology->num_hosts() > 2
                              ? absl::StrCat("; by a ring from ", t.hierarchical_ring_min_bytes,
                                             " B, by a direct exchange below")
                              : std::string())
                      << ")";
  }
  return path;
}

HierarchicalPath::~HierarchicalPath() {
  if (shm_ != nullptr && shm_->phase_times().ops > 0) {
    const auto& t = shm_->phase_times();
    ATHANOR_LOG(DEBUG) << "ucx: rank " << rank_ << ": " << t.ops << " hierarchical all-reduces took "
                       << t.wall << " s: on this host copying and reducing " << t.local
                       << " s, scaling, copying out and gathering " << t.out
                       << " s; between hosts (chunks overlapping) " << t.exchange << " s";
  }
}

std::string HierarchicalPath::Describe(size_t bytes) const {
  return absl::StrCat("hierarchically (shared memory on each host, blocks exchanged between hosts "
                      "over ",
                      inter_->has_links() ? "TCP sockets" : "UCX", ": ", inter_->AlgorithmFor(bytes),
                      ")");
}

void HierarchicalPath::DropExchange() {
  engine_->SetSweep(nullptr);
  inter_.reset();
}

}  // namespace ucx_internal
}  // namespace athanor
