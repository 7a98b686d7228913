// The env contract for ranks (stable; docs/architecture.md, "The env
// contract"), parsed once at the edge.
//
// Set by the agent and by athanor-run: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES,
// ATHANOR_JOB_ID, ATHANOR_ATTEMPT, ATHANOR_CHECKPOINT_URI, ATHANOR_COORDINATOR.
// Without RANK: OMPI_COMM_WORLD_* (mpirun), then PMIX_RANK, then SLURM_PROCID.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace athanor {

enum class RankEnvSource { kAlone, kContract, kOpenMpi, kPmix, kSlurm };

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr;  // empty when not given
  int master_port = 0;      // 0 when not given
  std::string cuda_visible_devices;
  std::string job_id;
  int attempt = 0;
  std::string checkpoint_uri;
  std::string coordinator;
  RankEnvSource source = RankEnvSource::kAlone;

  // The contract's variables, as the agent and athanor-run set them.
  std::map<std::string, std::string> ToEnvironment() const;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment as an EnvLookup.
EnvLookup ProcessEnv();

// InvalidArgument naming the variable when one is set but malformed (not an
// integer, rank >= world size, ...).
absl::StatusOr<RankEnv> ParseRankEnv(const EnvLookup& lookup);

// What an agent gives a rank for the bootstrap store's rendezvous
// (docs/security.md, "Rendezvous secret"), beside the contract:
//   ATHANOR_RENDEZVOUS_SECRET     the attempt's secret (absent: none)
//   ATHANOR_RENDEZVOUS_LISTEN_FD  rank 0 only: an inherited descriptor of a
//                                 TCP socket the agent bound to MASTER_PORT
//                                 and listens on; the store serves on it
//                                 instead of binding the port itself
struct RendezvousEnv {
  std::string secret;   // empty: none
  int listen_fd = -1;   // -1: none
};

// InvalidArgument naming the variable for a secret under 16 characters or a
// descriptor that is not an integer >= 3.
absl::StatusOr<RendezvousEnv> ParseRendezvousEnv(const EnvLookup& lookup);

}  // namespace athanor
