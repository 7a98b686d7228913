#include "worker/agent/box_activity.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "worker/agent/proc_stats.h"

namespace athanor::agent {
namespace {

std::string ReadSmall(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string text;
  char buf[4096];
  // /proc files are small; a bound keeps a strange one from costing much.
  while (in && text.size() < (1 << 20)) {
    in.read(buf, sizeof(buf));
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  return text;
}

// Socket inodes among a process's descriptors ("socket:[123]").
void AddSocketInodes(const std::filesystem::path& fd_dir, std::set<uint64_t>* out) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fd_dir, ec)) {
    std::error_code lec;
    const std::string target = std::filesystem::read_symlink(entry.path(), lec).string();
    if (lec || !absl::StartsWith(target, "socket:[") || !absl::EndsWith(target, "]")) continue;
    uint64_t inode = 0;
    if (absl::SimpleAtoi(absl::string_view(target).substr(8, target.size() - 9), &inode)) out->insert(inode);
  }
}

// One sock_diag dump of `family`'s TCP sockets into *out.
void DumpTcp(int family, TcpBytes* out) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return;
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = static_cast<uint8_t>(family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.idiag_ext = 1 << (INET_DIAG_INFO - 1);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, &msg, sizeof(msg), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    close(fd);
    return;
  }
  alignas(nlmsghdr) char buf[32768];
  for (bool done = false; !done;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    // Walked by hand rather than with NLMSG_OK/NLMSG_NEXT, whose int/unsigned
    // mix the stricter compilers refuse: every length is checked against what
    // is left before it is used.
    const size_t got = static_cast<size_t>(n);
    for (size_t off = 0; !done && off + sizeof(nlmsghdr) <= got;) {
      const auto* h = reinterpret_cast<const nlmsghdr*>(buf + off);
      if (h->nlmsg_len < sizeof(nlmsghdr) || h->nlmsg_len > got - off) break;
      off += NLMSG_ALIGN(h->nlmsg_len);
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        done = true;
        break;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
      const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      if (m->idiag_inode == 0) continue;
      const size_t attrs_len = h->nlmsg_len - NLMSG_LENGTH(sizeof(inet_diag_msg));
      const char* attrs = reinterpret_cast<const char*>(m + 1);
      for (size_t a_off = 0; a_off + sizeof(rtattr) <= attrs_len;) {
        const auto* a = reinterpret_cast<const rtattr*>(attrs + a_off);
        if (a->rta_len < sizeof(rtattr) || a->rta_len > attrs_len - a_off) break;
        a_off += RTA_ALIGN(a->rta_len);
        if (a->rta_type != INET_DIAG_INFO) continue;
        // An older kernel's shorter tcp_info leaves the byte counts at 0.
        tcp_info info{};
        std::memcpy(&info, RTA_DATA(a), std::min<size_t>(RTA_PAYLOAD(a), sizeof(info)));
        (*out)[m->idiag_inode] = static_cast<double>(info.tcpi_bytes_received) +
                                 static_cast<double>(info.tcpi_bytes_acked);
      }
    }
  }
  close(fd);
}

}  // namespace

TcpBytes ReadTcpBytes() {
  TcpBytes out;
  DumpTcp(AF_INET, &out);
  DumpTcp(AF_INET6, &out);
  return out;
}

bool ParseProcIo(const std::string& text, double* rchar, double* wchar, double* write_bytes) {
  int found = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
    double* into = kv.first == "rchar" ? rchar : kv.first == "wchar" ? wchar
                   : kv.first == "write_bytes" ? write_bytes : nullptr;
    if (into == nullptr) continue;
    uint64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &v)) continue;
    *into = static_cast<double>(v);
    ++found;
  }
  return found > 0;
}

double ParseNetDev(const std::string& text) {
  // Two header lines, then "  iface: rx_bytes rx_packets ... (8 rx fields)
  // tx_bytes ...".
  double total = 0;
  bool table = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, "Receive") && absl::StrContains(line, "Transmit")) table = true;
    size_t colon = line.find(':');
    if (!table || colon == absl::string_view::npos) continue;
    absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    if (name == "lo" || name.find('|') != absl::string_view::npos) continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipEmpty());
    if (f.size() < 16) continue;
    uint64_t rx = 0, tx = 0;
    if (!absl::SimpleAtoi(f[0], &rx) || !absl::SimpleAtoi(f[8], &tx)) continue;
    total += static_cast<double>(rx) + static_cast<double>(tx);
  }
  return table ? total : -1;
}

double SocketTally::Update(const TcpBytes& now) {
  for (const auto& [inode, bytes] : now) {
    auto it = last_.find(inode);
    const double before = it == last_.end() ? 0 : it->second;
    // Fewer bytes than before: the inode was reused by a new socket.
    total_ += bytes >= before ? bytes - before : bytes;
  }
  last_ = now;
  return total_;
}

BoxActivity SampleBoxActivity(pid_t pgid, const std::string& proc_root, const TcpBytes* tcp,
                              SocketTally* tally) {
  static const long ticks = sysconf(_SC_CLK_TCK);
  BoxActivity out;
  const std::filesystem::path root(proc_root);
  std::error_code ec;
  const auto own_ns = std::filesystem::read_symlink(root / "self/ns/net", ec);
  const auto leader_ns = std::filesystem::read_symlink(root / std::to_string(pgid) / "ns/net", ec);
  if (!ec && !own_ns.empty() && leader_ns != own_ns) {
    double bytes = ParseNetDev(ReadSmall(root / std::to_string(pgid) / "net/dev"));
    if (bytes >= 0) {
      out.measured = true;
      out.net_namespace = true;
      out.net_bytes = bytes;
    }
  }
  std::set<uint64_t> sockets;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    pid_t group = 0;
    double cpu = 0;
    if (!std::getline(stat, line) || !ParseProcStat(line, ticks, &group, &cpu) || group != pgid) {
      continue;
    }
    double rchar = 0, wchar = 0, written = 0;
    if (!ParseProcIo(ReadSmall(entry.path() / "io"), &rchar, &wchar, &written)) continue;
    out.measured = true;
    out.disk_write_bytes += written;
    if (!out.net_namespace) AddSocketInodes(entry.path() / "fd", &sockets);
  }
  if (!out.net_namespace) {
    TcpBytes live, mine;
    if (tcp == nullptr && !sockets.empty()) {
      live = ReadTcpBytes();
      tcp = &live;
    }
    for (uint64_t inode : sockets) {
      auto it = tcp->find(inode);
      if (it != tcp->end()) mine.insert(*it);
    }
    if (tally != nullptr) {
      out.net_bytes = tally->Update(mine);
    } else {
      for (const auto& [inode, bytes] : mine) out.net_bytes += bytes;
    }
  }
  return out;
}

}  // namespace athanor::agent
