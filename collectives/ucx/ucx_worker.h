// UcxWorker: one communicator's UCP context, worker and endpoints.
//
// Create wires every rank to every other (worker addresses through the TCP
// store), sends one empty message each way so every endpoint is up and
// watched before the first collective, and logs the lanes UCX chose.
//
// Thread model: constant after Create. Using the worker or an endpoint
// needs the engine's lock (OpEngine::mu()), except during Create (no other
// thread yet). Ownership: the PeerWatch is not owned and outlives this.
// Tear-down is in steps, because the shared-memory segments must go after
// the endpoints and before the context: CloseEndpoints, DestroyWorker, then
// the destructor (ucp_cleanup).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/ucx/peer_watch.h"

namespace athanor {
namespace ucx_internal {

inline absl::Status UcsError(const std::string& what, ucs_status_t s) {
  return absl::InternalError(absl::StrCat(what, ": ", ucs_status_string(s)));
}

// Tags: the user tag's low 20 bits and a sequence number select a call's
// messages (see ucx_communicator.h); below them, the sender, a chain and a
// message number.
inline uint64_t MakeTag(uint64_t tag_base, int sender, size_t chain, int msg) {
  return tag_base | (static_cast<uint64_t>(sender & 0xFFF) << 24) |
         (static_cast<uint64_t>(chain & 0xFFF) << 12) | static_cast<uint64_t>(msg & 0xFFF);
}
constexpr uint64_t kFullMask = ~0ull;
constexpr uint64_t kHelloTagBase = 0xFFFFFull << 44;

class UcxWorker {
 public:
  struct Options {
    int rank = 0, world_size = 1;
    std::chrono::milliseconds timeout{0};
    bool rma = false;     // memory keys (the shared-memory paths)
    bool wakeup = false;  // an event fd to sleep on (the progress thread)
    std::string keepalive_interval;  // UCX_KEEPALIVE_INTERVAL in the environment wins
    // By rank: peers on this host whose death is seen otherwise (a pidfd,
    // or they are this process). Their endpoints keep UCX shared memory,
    // which asking for peer error handling would drop; the others report a
    // dead peer to PeerWatch::OnEndpointError.
    std::vector<bool> local_peers;
  };
  // Errors: UCX's (Internal, naming the call), the store's, DeadlineExceeded
  // when a peer does not answer the hello, Unavailable when one dies.
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const Options& options,
                                                           TcpStoreClient* store, PeerWatch* peers);
  ~UcxWorker();  // DestroyWorker(), then ucp_cleanup
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  const std::vector<ucp_ep_h>& eps() const { return eps_; }
  ucp_ep_h ep(int peer) const { return eps_[peer]; }
  // UCX's lanes to `peer`, as ucp_ep_print_info names them ("lane[0]: ...; ...").
  std::string Lanes(int peer) const;

  // `progress`: whether it may progress the worker while a close completes
  // (false where the engine halted, OpEngine::Halt).
  void CloseEndpoints(bool progress = true);
  void DestroyWorker();

 private:
  UcxWorker() = default;
  absl::Status Init(const Options& options, TcpStoreClient* store, PeerWatch* peers);
  absl::Status Hello(const Options& options, PeerWatch* peers);

  struct EpContext {
    PeerWatch* peers;
    int peer;
  };
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::unique_ptr<EpContext>> ep_contexts_;
};

// Closes `eps` (null entries skipped) with UCP_EP_CLOSE_FLAG_FORCE, driving
// `worker` a bounded number of times per endpoint where a close does not
// complete at once (a peer that is gone cannot hold a destructor forever),
// or, with `progress` false, not at all (the close finishes in
// ucp_worker_destroy).
void CloseEndpoints(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps, bool progress = true);

}  // namespace ucx_internal
}  // namespace athanor
