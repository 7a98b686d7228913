#include "coordinator/core/job_network.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace athanor::coord {

std::string FormatIpv4(uint32_t a) {
  return absl::StrCat(a >> 24, ".", (a >> 16) & 255, ".", (a >> 8) & 255, ".", a & 255);
}

std::optional<uint32_t> ParseIpv4(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '.');
  if (parts.size() != 4) return std::nullopt;
  uint32_t a = 0;
  for (const std::string& p : parts) {
    uint32_t v = 0;
    if (p.empty() || p.size() > 3 || !absl::SimpleAtoi(p, &v) || v > 255) return std::nullopt;
    a = (a << 8) | v;
  }
  return a;
}

absl::StatusOr<JobNetworkRange> ParseJobNetwork(const std::string& cidr) {
  std::vector<std::string> parts = absl::StrSplit(cidr, '/');
  std::optional<uint32_t> base = parts.size() == 2 ? ParseIpv4(parts[0]) : std::nullopt;
  int32_t prefix = 0;
  if (!base || !absl::SimpleAtoi(parts[1], &prefix)) {
    return absl::InvalidArgumentError(absl::StrCat("--job-network: '", cidr, "' is not an IPv4 A.B.C.D/P"));
  }
  if (prefix < 8 || prefix > 24) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--job-network: /", prefix, " must be /8 to /24 (each job attempt gets a /24 of it)"));
  }
  const uint32_t host_bits = (uint32_t{1} << (32 - prefix)) - 1;
  if ((*base & host_bits) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--job-network: '", cidr, "' has bits set past /", prefix,
                                                   " (the network is ", FormatIpv4(*base & ~host_bits), "/",
                                                   prefix, ")"));
  }
  return JobNetworkRange{*base, prefix};
}

JobNetworks::JobNetworks(const std::string& cidr) {
  if (cidr.empty()) return;
  absl::StatusOr<JobNetworkRange> range = ParseJobNetwork(cidr);
  if (!range.ok()) {  // main.cc parses the flag first; a bad one here is a caller's bug
    ATHANOR_LOG(ERROR) << range.status() << "; job networks are off";
    return;
  }
  range_ = *range;
  count_ = uint32_t{1} << (24 - range->prefix);
}

std::optional<std::string> JobNetworks::Allocate() {
  if (!range_ || held_.size() >= count_) return std::nullopt;
  uint32_t i = cursor_ % count_;
  while (held_.contains(i)) i = (i + 1) % count_;  // ends: one is free
  held_.insert(i);
  cursor_ = (i + 1) % count_;
  return FormatIpv4(range_->base + (i << 8));
}

std::optional<uint32_t> JobNetworks::IndexOf(const std::string& subnet) const {
  std::optional<uint32_t> a = ParseIpv4(subnet);
  if (!range_ || !a || (*a & 255) != 0 || *a < range_->base) return std::nullopt;
  uint32_t i = (*a - range_->base) >> 8;
  if (i >= count_) return std::nullopt;
  return i;
}

void JobNetworks::Hold(const std::string& subnet) {
  if (std::optional<uint32_t> i = IndexOf(subnet)) held_.insert(*i);
}

void JobNetworks::Release(const std::string& subnet) {
  if (std::optional<uint32_t> i = IndexOf(subnet)) held_.erase(*i);
}

std::string JobNetworks::Address(const std::string& subnet, int32_t node_rank) {
  std::optional<uint32_t> a = ParseIpv4(subnet);
  if (node_rank < 0 || node_rank >= kMaxJobNetworkNodes) return "";
  return a ? FormatIpv4((*a & ~uint32_t{255}) + static_cast<uint32_t>(node_rank) + 1) : "";
}

}  // namespace athanor::coord
