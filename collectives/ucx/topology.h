// Where the ranks of a communicator live: which share a host, and so which
// can exchange data through shared memory instead of the network.
//
// A rank's host identity (HostIdentity) is the kernel's boot id plus the
// inode of its network namespace: two processes with the same pair run on
// one kernel in one network stack, which is exactly when UCX's shared-memory
// transports reach each other. Where either cannot be read it falls back to
// the hostname. Ranks publish it through the bootstrap store at start-up;
// Topology groups them.
//
// Pure data; no threads, no I/O except HostIdentity.
#pragma once

#include <string>
#include <vector>

namespace athanor {

// "<boot id>/net:<inode>", or "host:<hostname>" where /proc does not say.
std::string HostIdentity();

struct Topology {
  // Hosts in order of their lowest rank; each host's ranks in rank order.
  // hosts[h][0] is host h's leader.
  std::vector<std::vector<int>> hosts;
  std::vector<int> host_of;      // by rank
  std::vector<int> local_index;  // by rank: its place in its host's list
  // The largest number of ranks on one host: an all-reduce buffer is cut
  // into this many blocks, and local index j owns the blocks b with
  // b % (ranks on its host) == j (so every block has one owner per host).
  int max_local = 0;

  int num_hosts() const { return static_cast<int>(hosts.size()); }
  const std::vector<int>& host_ranks(int rank) const { return hosts[host_of[rank]]; }
  // The rank on `host` that owns block `block`.
  int Owner(int host, int block) const {
    const auto& h = hosts[host];
    return h[block % static_cast<int>(h.size())];
  }
  // "2+2", "3+1", "1+1+2": ranks per host in host order.
  std::string Layout() const;
};

// Groups ranks by equal identity strings (identities[r] is rank r's).
Topology MakeTopology(const std::vector<std::string>& identities);

}  // namespace athanor
