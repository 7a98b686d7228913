// JobNetworks: the subnets of the coordinator's --job-network, one /24 per
// live job attempt (docs/security.md, "A job's network"). An attempt holds
// its /24 from its placement until it releases its GPUs; its rank on node
// rank i has the address <subnet>.(i+1), so an attempt spans at most 254
// nodes. The subnet is kept in the job's record (JobRecord::network_subnet),
// so a restarted coordinator holds the same ones again (Hold), and no two
// live attempts ever share one.
//
// Subnets are handed out round robin from the last one chosen, so a released
// /24 is the last to be reused (routes and connection-tracking entries of
// its old attempt have long gone by then).
//
// Not thread-safe: confined to AttemptLauncher (ClusterState's owner).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace athanor::coord {

// The most nodes of one attempt in a job network (addresses .1 to .254).
inline constexpr int32_t kMaxJobNetworkNodes = 254;
// JobRecord::network_subnet of an attempt placed while every /24 was held:
// its ranks are told so and refuse to start (never run on the host's network).
inline constexpr char kNoFreeJobNetwork[] = "none";

struct JobNetworkRange {
  uint32_t base = 0;  // host order, aligned to the prefix
  int32_t prefix = 0; // 8..24
};

// "A.B.C.D/P" with 8 <= P <= 24 and no bits set past the prefix.
// InvalidArgument naming what is wrong.
absl::StatusOr<JobNetworkRange> ParseJobNetwork(const std::string& cidr);

// "A.B.C.D" of a host-order IPv4 address, and back (nullopt: not one).
std::string FormatIpv4(uint32_t address);
std::optional<uint32_t> ParseIpv4(const std::string& text);

class JobNetworks {
 public:
  // `cidr` empty: off (every call below answers "none").
  explicit JobNetworks(const std::string& cidr);

  bool enabled() const { return range_.has_value(); }
  // A free /24 ("A.B.C.0"), now held; nullopt when off or every one is held.
  std::optional<std::string> Allocate();
  // `subnet` is held again (a restored attempt); ignored when it is not one
  // of this range's (the range changed across a restart).
  void Hold(const std::string& subnet);
  void Release(const std::string& subnet);
  size_t held() const { return held_.size(); }

  // The attempt's address on node rank `node_rank` of `subnet`.
  static std::string Address(const std::string& subnet, int32_t node_rank);

 private:
  std::optional<uint32_t> IndexOf(const std::string& subnet) const;

  std::optional<JobNetworkRange> range_;
  uint32_t count_ = 0;        // /24s in the range
  std::set<uint32_t> held_;   // indices of held /24s
  uint32_t cursor_ = 0;       // the next index to try
};

}  // namespace athanor::coord
