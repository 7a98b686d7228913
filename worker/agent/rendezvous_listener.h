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
  int fd = -1;    // listening, close-on-exec; the caller closes it
  int port = 0;
};

// Binds `address`:`port` (0: a free port the kernel picks) and listens.
// `address` is where the ranks are told to find the store (MASTER_ADDR):
// an IPv4 literal of this node is bound as it is, anything else (a host
// name, an address that is not this node's, "") binds every address. A
// listener on the port at that address or on every address makes the bind
// fail, so the check is as strict as binding every address, but a process
// on another address of the host (another node's, where nodes share a host
// as in tests) does not count. Unavailable, saying that another process
// holds the port, when it is in use; InvalidArgument for a port outside
// 0..65535.
absl::StatusOr<RendezvousListener> ListenForRendezvous(const std::string& address, int port);

// The descriptor number a rank 0 finds its listening socket at.
inline constexpr int kRendezvousListenFd = 3;
// "1" in a job's environment: its rank 0 binds MASTER_PORT itself (PyTorch's
// TCPStore), so the agent neither holds nor hands down a listening socket.
inline constexpr char kRank0BindsMasterPortEnv[] = "ATHANOR_RANK0_BINDS_MASTER_PORT";

}  // namespace athanor::agent
