// JobNetworkHost: the host's side of job networks (the coordinator's
// --job-network; docs/security.md, "A job's network").
//
// A box (sandbox.h) of an attempt with a network has a network namespace of
// its own, made by its holder (athanor-sandbox-exec holder --net) with only
// loopback up; every rank of the attempt on this node joins it, so traffic
// between them stays inside it. Attach() joins it to the host:
//   - a veth pair: inside, `eth0` with the attempt's address /32, a route to
//     the gateway 169.254.1.1 on the link and the default route via it (the
//     gateway's MAC a permanent neighbour entry: the host side's, so the box
//     needs no ARP answer from the host, as in Calico's layout); outside,
//     `ath<hash of the box>` with a /32 route to the box's address;
//   - a /32 route to every peer's address via the peer's host (none for a
//     peer on this host: its own agent routes it to its box);
//   - filter rules, in one chain of this agent's (ATHANOR-NET-<hash of the
//     tag>, jumped to first from FORWARD and INPUT): from the box, to the
//     attempt's /24 ACCEPT, to an --net-allow CIDR[:PORT] ACCEPT (and
//     MASQUERADE, in ATHANOR-NAT-<hash> from POSTROUTING), anything else
//     DROP, the host itself included (INPUT); to the box, replies of
//     connections it made and packets from the attempt's /24 ACCEPT, anything
//     else DROP.
// Detach() removes the routes and rules (the veth goes with the namespace).
// What Attach() did is written down first, as the commands that undo it, in
// STATE_DIR/<veth>.undo (and the chains' in STATE_DIR/chains.undo); Create()
// runs every such file a killed predecessor left, so leftovers go at the next
// start. The chains are made at the first Attach(): an agent that never gets
// a networked rank never touches the host's tables.
//
// Routing across hosts is plain: peers' hosts must reach each other directly
// (one L2 segment, as Calico without an overlay); the host forwards IPv4
// (net.ipv4.ip_forward=1, set at the first Attach()).
//
// Tools: `ip` (iproute2), `nsenter` (util-linux) and `iptables` (with the nft
// or legacy backend), run through common/subprocess.h; errors name the
// command and its output.
//
// Thread model: not thread-safe; Sandbox calls it under RankSupervisor's lock.
// Attach() runs a dozen short commands (a few ms each) and resolves peers'
// hosts given as names (the coordinator's node hosts are usually addresses).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace athanor::agent {

struct JobNetworkPeer {
  std::string address;  // the attempt's address on that node
  std::string host;     // that node's host: an IPv4 literal or a name
};

// An attempt's network on this node (RankSpec.network).
struct JobNetworkSpec {
  std::string address;  // this node's; "" when the coordinator had no /24 free
  int32_t prefix_length = 0;
  std::vector<JobNetworkPeer> peers;  // every node of the attempt, this one included
};

// InvalidArgument naming what is wrong: an address that is not IPv4, a
// prefix other than 24, more than 254 peers, a peer outside the /24 or
// without a host, this node's address not among the peers.
absl::Status ValidateJobNetwork(const JobNetworkSpec& spec);

// An --net-allow entry: CIDR[:PORT] (port 0: every port).
struct NetAllow {
  std::string cidr;  // A.B.C.D/P, normalised
  int port = 0;
};
absl::StatusOr<NetAllow> ParseNetAllow(const std::string& text);

class JobNetworkHost {
 public:
  // `tag`: the agent's (sandbox.h); `state_dir`: root-only, made when
  // missing; runs the undo files found there.
  static absl::StatusOr<std::unique_ptr<JobNetworkHost>> Create(const std::string& tag, std::string state_dir,
                                                                std::vector<NetAllow> allow);
  ~JobNetworkHost();  // detaches every box, removes the chains
  JobNetworkHost(const JobNetworkHost&) = delete;
  JobNetworkHost& operator=(const JobNetworkHost&) = delete;

  // Joins the network namespace of `holder` (the box `box`'s pid 1) to the
  // host for `spec` (validated first). On error, undoes what it did.
  absl::Status Attach(const std::string& box, pid_t holder, const JobNetworkSpec& spec);
  // Removes the box's routes and rules; a box never attached is ignored.
  void Detach(const std::string& box);

  // The host side's name for `box` ("ath" + 8 hex digits).
  std::string VethName(const std::string& box) const;

 private:
  struct Attached {
    std::string veth;
    std::vector<std::vector<std::string>> undo;  // commands, run in order
  };
  JobNetworkHost(std::string tag, std::string state_dir, std::vector<NetAllow> allow);
  absl::Status EnsureChains();

  const std::string tag_;
  const std::string state_dir_;
  const std::vector<NetAllow> allow_;
  const std::string filter_chain_, nat_chain_;
  bool chains_made_ = false;
  std::map<std::string, Attached> boxes_;  // by box name
};

}  // namespace athanor::agent
