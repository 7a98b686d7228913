// ParseEtcdUri, PrefixEnd and Op's constructors: the pure parts of
// etcd_client.h.
#include <algorithm>
#include <charconv>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/store/etcd/etcd_client.h"

namespace athanor::coord::etcd {
namespace {

constexpr absl::string_view kScheme = "etcd://";
constexpr absl::string_view kDefaultPrefix = "/athanor";
// More endpoints than any etcd cluster has members (etcd advises 3, 5 or 7).
constexpr size_t kMaxEndpoints = 32;

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-';
}
bool IsV6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
         c == '.';
}
bool IsPrefixChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == '-';
}

// "host:port" or "[v6]:port", port in 1..65535.
absl::Status CheckEndpoint(absl::string_view uri, absl::string_view ep) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd URI '", uri, "': endpoint '", ep, "' ", why));
  };
  absl::string_view host, port;
  if (ep.front() == '[') {
    size_t close = ep.find(']');
    if (close == absl::string_view::npos) return bad("has a bad host");
    host = ep.substr(0, close + 1);
    absl::string_view v6 = host.substr(1, host.size() - 2);
    if (v6.empty() || !std::all_of(v6.begin(), v6.end(), IsV6Char)) return bad("has a bad host");
    absl::string_view after = ep.substr(close + 1);
    if (after.empty() || after.front() != ':') return bad("has no port (expected HOST:PORT)");
    port = after.substr(1);
  } else {
    size_t colon = ep.rfind(':');
    if (colon == absl::string_view::npos) return bad("has no port (expected HOST:PORT)");
    host = ep.substr(0, colon);
    port = ep.substr(colon + 1);
    if (host.empty()) return bad("has no host");
    if (!std::all_of(host.begin(), host.end(), IsHostChar)) return bad("has a bad host");
  }
  if (port.empty()) return bad("has no port (expected HOST:PORT)");
  int p = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || ptr != port.data() + port.size() || p < 1 || p > 65535) {
    return bad(absl::StrCat("has a bad port '", port, "' (expected 1..65535)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EtcdUri> ParseEtcdUri(const std::string& uri) {
  if (!absl::StartsWith(uri, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd URI '", uri, "': expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"));
  }
  absl::string_view rest = absl::string_view(uri).substr(kScheme.size());
  size_t slash = rest.find('/');
  absl::string_view hosts = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd URI '", uri, "': no endpoint"));
  }
  EtcdUri out;
  for (absl::string_view ep : absl::StrSplit(hosts, ',')) {
    if (ep.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("etcd URI '", uri, "': empty endpoint"));
    }
    if (out.endpoints.size() == kMaxEndpoints) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd URI '", uri, "': more than ", kMaxEndpoints, " endpoints"));
    }
    if (absl::Status s = CheckEndpoint(uri, ep); !s.ok()) return s;
    out.endpoints.emplace_back(ep);
  }
  for (char c : path) {
    if (!IsPrefixChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd URI '", uri, "': prefix '", path, "' may hold only [A-Za-z0-9_./-]"));
    }
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.prefix = path.empty() ? std::string(kDefaultPrefix) : std::string(path);
  return out;
}

std::string PrefixEnd(const std::string& prefix) {
  // The smallest key greater than every key that starts with `prefix`: its
  // last byte below 0xff incremented, the rest dropped.
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  // Every byte 0xff (or no prefix): "\0" is etcd's "to the end of the keys".
  return std::string(1, '\0');
}

Op Op::Put(std::string key, std::string value, int64_t lease) {
  Op op;
  op.kind = Kind::kPut;
  op.key = std::move(key);
  op.value = std::move(value);
  op.lease = lease;
  return op;
}

Op Op::Delete(std::string key, std::string range_end) {
  Op op;
  op.kind = Kind::kDelete;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

Op Op::Range(std::string key, std::string range_end) {
  Op op;
  op.kind = Kind::kRange;
  op.key = std::move(key);
  op.range_end = std::move(range_end);
  return op;
}

}  // namespace athanor::coord::etcd
