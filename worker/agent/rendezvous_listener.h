// The master port of an attempt whose rank 0 runs on this node: the agent
// binds it and listens before rank 0 starts, then hands the listening socket
// to rank 0 (ATHANOR_RENDEZVOUS_LISTEN_FD, common/rank_env.h), whose TCP store
// serves on it (collectives/bootstrap/tcp_store.h). Binding is the check that
// no other process (say another tenant's rank squatting on the port) listens
// there, and from then on the port is the attempt's: there is no moment at
// which it is free for a squatter to take. Thread model: stateless functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace athanor::agent {

struct RendezvousListener {
  int fd = -1;    // listening on 0.0.0.0:port, close-on-exec; the caller closes it
  int port = 0;
};

// Binds 0.0.0.0:`port` (0: a free port the kernel picks) and listens.
// Unavailable, saying that another process holds the port, when it is in
// use; InvalidArgument for a port outside 0..65535.
absl::StatusOr<RendezvousListener> ListenForRendezvous(int port);

// The descriptor number a rank 0 finds its listening socket at.
inline constexpr int kRendezvousListenFd = 3;

}  // namespace athanor::agent
