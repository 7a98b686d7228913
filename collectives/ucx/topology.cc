#include "collectives/ucx/topology.h"

#include <sys/stat.h>

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/net.h"

namespace athanor {

std::string HostIdentity() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  boot_id = std::string(absl::StripAsciiWhitespace(boot_id));
  struct stat st {};
  if (boot_id.empty() || stat("/proc/self/ns/net", &st) != 0) {
    return absl::StrCat("host:", LocalHostname());
  }
  return absl::StrCat(boot_id, "/net:", static_cast<unsigned long long>(st.st_ino));
}

Topology MakeTopology(const std::vector<std::string>& identities) {
  Topology t;
  const int n = static_cast<int>(identities.size());
  t.host_of.assign(n, -1);
  t.local_index.assign(n, -1);
  std::map<std::string, int> index;
  for (int r = 0; r < n; ++r) {
    auto [it, added] = index.emplace(identities[r], t.num_hosts());
    if (added) t.hosts.emplace_back();
    const int h = it->second;
    t.host_of[r] = h;
    t.local_index[r] = static_cast<int>(t.hosts[h].size());
    t.hosts[h].push_back(r);
  }
  for (const auto& h : t.hosts) t.max_local = std::max(t.max_local, static_cast<int>(h.size()));
  return t;
}

std::string Topology::Layout() const {
  std::vector<size_t> sizes;
  for (const auto& h : hosts) sizes.push_back(h.size());
  return absl::StrJoin(sizes, "+");
}

}  // namespace athanor
