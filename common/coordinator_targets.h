// The gRPC target for a list of coordinators (`--coordinator a:1,b:2,c:3`,
// ATHANOR_COORDINATOR=a:1,b:2,c:3).
//
// Coordinators on etcd (docs/operations.md, "Coordinators on etcd"): every
// member listens, but only the leader serves; a standby answers every call
// with UNAVAILABLE naming the leader (coordinator/rpc/standby_server.h). Each
// member reports whether it leads through gRPC's health service
// (kLeaderHealthService: SERVING on the leader only), and a list's channel
// uses round_robin with client-side health checking, so it keeps a
// connection to every member and sends calls only to the one that reports
// SERVING: after a failover, the moment the new leader says so. gRPC takes
// such a list only as addresses (`ipv4:1.2.3.4:7700,5.6.7.8:7700`), so host
// names are resolved here, once, when the channel is made.
//
// A single address stays exactly as given (gRPC's own DNS resolution and
// pick_first, as before). Certificates are checked against the coordinator's
// fixed name (security::kCoordinatorName) whichever address answers. A list's
// calls carry gRPC's default :authority (the address list): setting one
// member's address there makes gRPC's TLS check refuse the health checks of
// every other member ("call host does not match SSL server name").
// coordinator_channel.h applies all of it to a channel's arguments.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

// The health service name whose status says whether a coordinator leads.
inline constexpr char kLeaderHealthService[] = "athanor.leader";

// The service config of a list's channel: round_robin over its addresses,
// each health-checked for kLeaderHealthService. A single address's channel
// may take it too: its calls that wait_for_ready then wait until that
// coordinator leads (tests that restart one on etcd do).
std::string LeaderServiceConfig();

struct CoordinatorTarget {
  std::string target;          // for grpc::CreateChannel
  std::string service_config;  // empty: gRPC's default; else GRPC_ARG_SERVICE_CONFIG (a list)
};

// Splits `list` at commas into HOST:PORT entries ([V6]:PORT for IPv6).
// InvalidArgument naming the entry when one is empty, lacks a port or has
// one outside 1..65535.
absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(const std::string& list);

// The target for `list`: itself when it holds one entry; else every entry's
// addresses (IPv4 when every host has one, else IPv6), in the list's order,
// with the service config that follows the leader.
// InvalidArgument or NotFound naming the entry that does not parse or resolve.
absl::StatusOr<CoordinatorTarget> CoordinatorTargetFor(const std::string& list);

}  // namespace athanor
