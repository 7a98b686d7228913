#include "common/coordinator_targets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace athanor {
namespace {

struct HostPort {
  std::string host;  // without brackets
  std::string port;
};

absl::StatusOr<HostPort> SplitEntry(const std::string& entry) {
  HostPort hp;
  std::string port;
  if (!entry.empty() && entry[0] == '[') {
    const size_t close = entry.find(']');
    if (close == std::string::npos || close + 1 >= entry.size() || entry[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("coordinator '", entry, "': expected [IPV6]:PORT"));
    }
    hp.host = entry.substr(1, close - 1);
    port = entry.substr(close + 2);
  } else {
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || entry.find(':') != colon) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator '", entry, "': expected HOST:PORT (an IPv6 address in brackets)"));
    }
    hp.host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
  }
  int n = 0;
  if (hp.host.empty() || !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator '", entry, "': expected HOST:PORT with a port in 1..65535"));
  }
  hp.port = std::to_string(n);
  return hp;
}

// The host's addresses of `family`, in the resolver's order, without repeats.
absl::StatusOr<std::vector<std::string>> Resolve(const HostPort& hp, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &found);
  if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_ADDRFAMILY) return std::vector<std::string>{};
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("coordinator host '", hp.host, "': ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr = family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                                         : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(family, addr, text, sizeof text) == nullptr) continue;
    if (seen.insert(text).second) out.push_back(text);
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(const std::string& list) {
  std::vector<std::string> entries = absl::StrSplit(list, ',');
  for (std::string& e : entries) {
    e = std::string(absl::StripAsciiWhitespace(e));
    if (e.empty()) return absl::InvalidArgumentError(absl::StrCat("coordinator list '", list, "': an empty entry"));
    RETURN_IF_ERROR(SplitEntry(e).status());
  }
  return entries;
}

std::string LeaderServiceConfig() {
  return absl::StrCat(R"({"loadBalancingConfig":[{"round_robin":{}}],)", R"("healthCheckConfig":{"serviceName":")",
                      kLeaderHealthService, R"("}})");
}

absl::StatusOr<CoordinatorTarget> CoordinatorTargetFor(const std::string& list) {
  ASSIGN_OR_RETURN(std::vector<std::string> entries, ParseCoordinatorList(list));
  if (entries.size() == 1) return CoordinatorTarget{.target = entries[0]};
  std::vector<std::string> v4, v6;
  bool all_v4 = true, all_v6 = true;
  for (const std::string& e : entries) {
    ASSIGN_OR_RETURN(HostPort hp, SplitEntry(e));
    ASSIGN_OR_RETURN(std::vector<std::string> a4, Resolve(hp, AF_INET));
    ASSIGN_OR_RETURN(std::vector<std::string> a6, Resolve(hp, AF_INET6));
    if (a4.empty() && a6.empty()) {
      return absl::NotFoundError(absl::StrCat("coordinator '", e, "': the host has no address"));
    }
    all_v4 = all_v4 && !a4.empty();
    all_v6 = all_v6 && !a6.empty();
    for (const std::string& a : a4) v4.push_back(absl::StrCat(a, ":", hp.port));
    for (const std::string& a : a6) v6.push_back(absl::StrCat("[", a, "]:", hp.port));
  }
  // Calls go only to the member whose health says it leads (the header).
  const std::string config = LeaderServiceConfig();
  if (all_v4) return CoordinatorTarget{"ipv4:" + absl::StrJoin(v4, ","), config};
  if (all_v6) return CoordinatorTarget{"ipv6:" + absl::StrJoin(v6, ","), config};
  return absl::InvalidArgumentError(absl::StrCat(
      "coordinator list '", list, "': some hosts have only IPv4 addresses and others only IPv6; use one family"));
}

}  // namespace athanor
