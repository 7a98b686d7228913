// StandbyServer: what a coordinator that does not lead serves on its
// --listen while it waits for the lead (store/etcd/leader_election.h).
//
// Every call, whatever its service and method, is answered at once with
// UNAVAILABLE and a message naming the leader as last seen, which also rides
// in the trailing metadata `athanor-leader` (HOST:PORT): a client given only
// this address learns where to go, and one given every coordinator never
// calls here. gRPC's health service says NOT_SERVING for
// kLeaderHealthService (common/coordinator_targets.h), so a list's channel
// keeps its connection here but sends no call until this process leads.
//
// A standby has no core: it answers no read itself. It is destroyed when the
// process wins the lead, before the leader's server takes the port.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace athanor::coord {

inline constexpr char kLeaderMetadataKey[] = "athanor-leader";

class StandbyServer {
 public:
  // Listens on `listen` with `credentials`; `port` (may be null) gets the
  // port bound. Turns on gRPC's default health service for every server of
  // the process (the leader's server reports SERVING on it).
  static absl::StatusOr<std::unique_ptr<StandbyServer>> Start(const std::string& listen,
                                                             std::shared_ptr<grpc::ServerCredentials> credentials,
                                                             int* port);
  // Stops at once: calls still open (health watches) are cancelled, and the
  // port is free when it returns.
  ~StandbyServer();

  // The leader now (its advertised address and its term), from the
  // election's wait.
  void SetLeader(const std::string& address, int64_t term);

  // The status every call gets now.
  grpc::Status Answer(std::string* leader) const;

 private:
  class Redirect;
  StandbyServer();

  mutable absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Redirect> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace athanor::coord
