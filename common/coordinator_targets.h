// The gRPC target for a list of coordinators (`--coordinator a:1,b:2,c:3`,
// ATHANOR_COORDINATOR=a:1,b:2,c:3).
//
// Coordinators on etcd (docs/operations.md, "Coordinators on etcd"): only
// the leader listens; standbys do not. One channel whose target names every
// address, with gRPC's pick_first policy (its default), connects to the one
// that accepts, and after a failover, when that connection breaks, tries
// them again in order and so finds the new leader. gRPC takes such a list
// only as addresses (`ipv4:1.2.3.4:7700,5.6.7.8:7700`), so host names are
// resolved here, once, when the channel is made.
//
// A single address stays exactly as given (gRPC's own DNS resolution, as
// before). Certificates are checked against the coordinator's fixed name
// (security::kCoordinatorName) whichever address answers; `authority` (the
// list's first entry) is what calls carry as :authority in place of the
// address list.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor {

struct CoordinatorTarget {
  std::string target;     // for grpc::CreateChannel
  std::string authority;  // empty: gRPC's default; else GRPC_ARG_DEFAULT_AUTHORITY
};

// Splits `list` at commas into HOST:PORT entries ([V6]:PORT for IPv6).
// InvalidArgument naming the entry when one is empty, lacks a port or has
// one outside 1..65535.
absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(const std::string& list);

// The target for `list`: itself when it holds one entry; else every entry's
// addresses (IPv4 when every host has one, else IPv6), in the list's order.
// InvalidArgument or NotFound naming the entry that does not parse or resolve.
absl::StatusOr<CoordinatorTarget> CoordinatorTargetFor(const std::string& list);

}  // namespace athanor
