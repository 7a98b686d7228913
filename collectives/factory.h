// Creates a Communicator by backend name ("ucx", "mpi", "nccl").
//
// world_size 1 needs no network at all for "ucx" and "mpi": the result copies
// (out-of-place) or does nothing (in-place). Otherwise rank 0 serves a TCP
// key-value store at master_addr:master_port that every rank uses to exchange
// its address ("ucx", "nccl"); "mpi" needs the process to be started by mpirun
// and fails with FailedPrecondition otherwise.
//
// Errors: InvalidArgument for a bad option or an unknown/unbuilt backend;
// DeadlineExceeded naming the missing ranks when some rank never joins within
// `timeout`; Unavailable/Internal with the backend's message otherwise.
// Thread-safe: independent calls may run concurrently (each builds its own).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"
#include "collectives/ucx/ucx_tuning.h"

namespace athanor {

struct CommunicatorOptions {
  std::string backend = "ucx";  // "ucx" | "mpi" | "nccl"
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // rank 0 serves the TCP store there
  // The rendezvous secret the store and its clients prove to each other
  // (empty: none), and, for rank 0, a listening socket the agent bound on
  // master_port (-1: the store binds it). Read at the edge by the mains
  // (ParseRendezvousEnv, common/rank_env.h).
  std::string rendezvous_secret;
  int rendezvous_listen_fd = -1;
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};  // bootstrap and default op timeout
  // The ucx backend's knobs, built at the edge (UcxTuningFromEnv in the
  // mains); the other backends ignore them.
  UcxTuning ucx;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommunicatorOptions& options);

// Backends compiled into this build, e.g. {"ucx", "mpi", "nccl"}.
std::vector<std::string> AvailableBackends();

}  // namespace athanor
