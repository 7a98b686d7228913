#include "worker/agent/job_network.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/subprocess.h"

namespace athanor::agent {
namespace {

using Command = std::vector<std::string>;

constexpr char kToolPath[] = "/usr/sbin:/usr/bin:/sbin:/bin";
constexpr char kGateway[] = "169.254.1.1";  // the box's default gateway: the host side of its veth
constexpr int kMaxPeers = 254;
constexpr size_t kMaxHostName = 253;

uint32_t Fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::optional<uint32_t> ParseIpv4(const std::string& text) {
  in_addr a;
  if (text.empty() || text.size() > 15 || inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string FormatIpv4(uint32_t a) {
  return absl::StrCat(a >> 24, ".", (a >> 16) & 255, ".", (a >> 8) & 255, ".", a & 255);
}

// Runs `argv` with a bare environment; the error names the command and its output.
absl::Status Run(const Command& argv) {
  SubprocessOptions o;
  o.argv = argv;
  o.inherit_env = false;
  o.env = {{"PATH", kToolPath}, {"LC_ALL", "C"}};
  o.capture_stdout = true;
  o.stderr_path = "=stdout";
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(o));
  std::string out = p->ReadAllStdout();
  ExitInfo exit = p->Wait();
  if (exit.exit_code == 0 && exit.signal == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (", exit.ToString(), "): ",
                                          absl::StripAsciiWhitespace(out.substr(0, 1024))));
}

// Undo commands fail harmlessly when what they undo is gone already.
void RunAll(const std::vector<Command>& commands) {
  for (const Command& c : commands) {
    absl::Status s = Run(c);
    if (!s.ok()) ATHANOR_LOG(DEBUG) << "job network cleanup: " << s.message();
  }
}

absl::Status WriteUndoFile(const std::string& path, const std::vector<Command>& commands) {
  std::string text;
  for (const Command& c : commands) absl::StrAppend(&text, absl::StrJoin(c, " "), "\n");
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename " + tmp);
  return absl::OkStatus();
}

// Runs an undo file (only `ip` and `iptables` commands: the folder is the
// agent's, but nothing else belongs there) and removes it. `leftover`: a
// killed predecessor's, which is worth a line in the log.
void RunUndoFile(const std::string& path, bool leftover) {
  std::ifstream f(path);
  std::vector<Command> commands;
  std::string line;
  while (std::getline(f, line) && commands.size() < 10000) {
    Command c = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!c.empty() && (c[0] == "ip" || c[0] == "iptables")) commands.push_back(std::move(c));
  }
  if (leftover) {
    ATHANOR_LOG(INFO) << "job networks: removing what a killed agent left (" << path << ", "
                      << commands.size() << " commands)";
  }
  RunAll(commands);
  unlink(path.c_str());
}

absl::Status WriteSysctl(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", value, " to ", path));
  return absl::OkStatus();
}

bool IsLocalAddress(uint32_t address) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool found = false;
  for (ifaddrs* i = all; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    found = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == address;
  }
  freeifaddrs(all);
  return found;
}

absl::StatusOr<uint32_t> ResolveHost(const std::string& host) {
  if (std::optional<uint32_t> a = ParseIpv4(host)) return *a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve the peer host '", host, "': ", gai_strerror(rc)));
  }
  uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr);
  freeaddrinfo(res);
  return a;
}

bool HostNameLike(const std::string& host) {
  if (host.empty() || host.size() > kMaxHostName) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

Command Iptables(std::vector<std::string> args) {
  Command c = {"iptables", "-w", "5"};
  c.insert(c.end(), args.begin(), args.end());
  return c;
}

}  // namespace

absl::Status ValidateJobNetwork(const JobNetworkSpec& spec) {
  if (spec.address.empty()) {
    return absl::FailedPreconditionError(
        "the coordinator had no free /24 of its --job-network for this attempt (every one is held by a "
        "live attempt)");
  }
  std::optional<uint32_t> own = ParseIpv4(spec.address);
  if (!own) return absl::InvalidArgumentError(absl::StrCat("network address '", spec.address.substr(0, 64), "' is not IPv4"));
  if (spec.prefix_length != 24) {
    return absl::InvalidArgumentError(absl::StrCat("network prefix /", spec.prefix_length, ": expected /24"));
  }
  if (spec.peers.empty() || spec.peers.size() > kMaxPeers) {
    return absl::InvalidArgumentError(absl::StrCat("network peers: ", spec.peers.size(), ", expected 1 to ", kMaxPeers));
  }
  const uint32_t subnet = *own & 0xffffff00u;
  if (*own == subnet || *own == (subnet | 255)) {
    return absl::InvalidArgumentError(absl::StrCat("network address ", spec.address, " is not a host's of its /24"));
  }
  bool self = false;
  std::set<uint32_t> seen;
  for (const JobNetworkPeer& p : spec.peers) {
    std::optional<uint32_t> a = ParseIpv4(p.address);
    if (!a || (*a & 0xffffff00u) != subnet || (*a & 255) == 0 || (*a & 255) == 255 || !seen.insert(*a).second) {
      return absl::InvalidArgumentError(absl::StrCat("network peer '", p.address.substr(0, 64),
                                                     "' is not a distinct host address of ", FormatIpv4(subnet), "/24"));
    }
    if (!HostNameLike(p.host)) {
      return absl::InvalidArgumentError(absl::StrCat("network peer ", p.address, ": host '", p.host.substr(0, 64),
                                                     "' is not an address or host name"));
    }
    self = self || *a == *own;
  }
  if (!self) return absl::InvalidArgumentError(absl::StrCat("network address ", spec.address, " is not among its peers"));
  return absl::OkStatus();
}

absl::StatusOr<NetAllow> ParseNetAllow(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--net-allow '", text.substr(0, 64), "': ", why));
  };
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2) return bad("expected CIDR[:PORT]");
  NetAllow allow;
  if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &allow.port) || allow.port < 1 || allow.port > 65535)) {
    return bad("the port must be 1..65535");
  }
  std::vector<std::string> cidr = absl::StrSplit(parts[0], '/');
  int prefix = 32;
  std::optional<uint32_t> a = ParseIpv4(cidr[0]);
  if (!a || cidr.size() > 2 || (cidr.size() == 2 && (!absl::SimpleAtoi(cidr[1], &prefix) || prefix < 0 || prefix > 32))) {
    return bad("expected an IPv4 address or A.B.C.D/P");
  }
  const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  allow.cidr = absl::StrCat(FormatIpv4(*a & mask), "/", prefix);
  return allow;
}

absl::StatusOr<std::unique_ptr<JobNetworkHost>> JobNetworkHost::Create(const std::string& tag, std::string state_dir,
                                                                       std::vector<NetAllow> allow) {
  if (mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + state_dir);
  struct stat st;
  if (lstat(state_dir.c_str(), &st) != 0) return ErrnoStatus("stat " + state_dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(state_dir, " is not a folder of the agent's that only it writes"));
  }
  // Boxes first, then the chains their rules were in.
  std::vector<std::string> files;
  if (DIR* d = opendir(state_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (absl::EndsWith(name, ".undo") && name != "chains.undo") files.push_back(state_dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) RunUndoFile(f, true);
  if (access((state_dir + "/chains.undo").c_str(), F_OK) == 0) RunUndoFile(state_dir + "/chains.undo", true);
  return std::unique_ptr<JobNetworkHost>(new JobNetworkHost(tag, std::move(state_dir), std::move(allow)));
}

JobNetworkHost::JobNetworkHost(std::string tag, std::string state_dir, std::vector<NetAllow> allow)
    : tag_(std::move(tag)), state_dir_(std::move(state_dir)), allow_(std::move(allow)),
      filter_chain_(absl::StrCat("ATHANOR-NET-", absl::Hex(Fnv1a(tag_), absl::kZeroPad8))),
      nat_chain_(absl::StrCat("ATHANOR-NAT-", absl::Hex(Fnv1a(tag_), absl::kZeroPad8))) {}

JobNetworkHost::~JobNetworkHost() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : boxes_) names.push_back(name);
  for (const std::string& name : names) Detach(name);
  if (chains_made_) RunUndoFile(state_dir_ + "/chains.undo", false);
}

std::string JobNetworkHost::VethName(const std::string& box) const {
  return absl::StrCat("ath", absl::Hex(Fnv1a(tag_ + "/" + box), absl::kZeroPad8));
}

absl::Status JobNetworkHost::EnsureChains() {
  if (chains_made_) return absl::OkStatus();
  const std::string& f = filter_chain_;
  const std::string& n = nat_chain_;
  std::vector<Command> undo = {
      Iptables({"-D", "FORWARD", "-j", f}), Iptables({"-D", "INPUT", "-j", f}), Iptables({"-F", f}),
      Iptables({"-X", f}), Iptables({"-t", "nat", "-D", "POSTROUTING", "-j", n}), Iptables({"-t", "nat", "-F", n}),
      Iptables({"-t", "nat", "-X", n})};
  RunAll(undo);  // a same-tagged agent's, should its state folder have gone
  RETURN_IF_ERROR(WriteUndoFile(state_dir_ + "/chains.undo", undo));
  chains_made_ = true;
  for (const Command& c : {Iptables({"-N", f}), Iptables({"-I", "FORWARD", "1", "-j", f}),
                           Iptables({"-I", "INPUT", "1", "-j", f}), Iptables({"-t", "nat", "-N", n}),
                           Iptables({"-t", "nat", "-I", "POSTROUTING", "1", "-j", n})}) {
    absl::Status s = Run(c);
    if (!s.ok()) {
      RunUndoFile(state_dir_ + "/chains.undo", false);
      chains_made_ = false;
      return absl::FailedPreconditionError(absl::StrCat("cannot set up the job networks' filter: ", s.message()));
    }
  }
  // Boxes' packets cross the host by its routes.
  RETURN_IF_ERROR(WriteSysctl("/proc/sys/net/ipv4/ip_forward", "1"));
  ATHANOR_LOG(INFO) << "job networks: chains " << f << " (FORWARD, INPUT) and " << n
                    << " (nat POSTROUTING), IPv4 forwarding on";
  return absl::OkStatus();
}

absl::Status JobNetworkHost::Attach(const std::string& box, pid_t holder, const JobNetworkSpec& spec) {
  RETURN_IF_ERROR(ValidateJobNetwork(spec));
  if (boxes_.contains(box)) return absl::OkStatus();
  RETURN_IF_ERROR(EnsureChains());
  const uint32_t own = *ParseIpv4(spec.address);
  const std::string subnet = absl::StrCat(FormatIpv4(own & 0xffffff00u), "/24");
  const std::string address = spec.address + "/32";
  const std::string veth = VethName(box);
  const std::string netns = absl::StrCat("--net=/proc/", holder, "/ns/net");
  auto inside = [&](std::vector<std::string> args) {
    Command c = {"nsenter", netns, "ip"};
    c.insert(c.end(), args.begin(), args.end());
    return c;
  };

  // Routes to peers on other hosts; a peer here is its own agent's to route.
  std::vector<Command> routes;
  for (const JobNetworkPeer& p : spec.peers) {
    if (p.address == spec.address) continue;
    ASSIGN_OR_RETURN(uint32_t host, ResolveHost(p.host));
    if (IsLocalAddress(host)) continue;
    routes.push_back({"ip", "route", "replace", p.address + "/32", "via", FormatIpv4(host)});
  }
  // The filter: rules for the box's veth only, so boxes never meet in it.
  std::vector<std::vector<std::string>> filter = {{"-i", veth, "-d", subnet, "-j", "ACCEPT"}};
  for (const NetAllow& a : allow_) {
    if (a.port == 0) {
      filter.push_back({"-i", veth, "-d", a.cidr, "-j", "ACCEPT"});
    } else {
      for (const char* proto : {"tcp", "udp"}) {
        filter.push_back({"-i", veth, "-d", a.cidr, "-p", proto, "--dport", std::to_string(a.port), "-j", "ACCEPT"});
      }
    }
  }
  filter.push_back({"-i", veth, "-j", "DROP"});
  filter.push_back({"-o", veth, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"});
  filter.push_back({"-o", veth, "-s", subnet, "-j", "ACCEPT"});
  filter.push_back({"-o", veth, "-j", "DROP"});
  std::vector<std::string> nat = {"-s", address, "!", "-d", subnet, "-j", "MASQUERADE"};

  // What undoes it, written down before anything is done.
  Attached attached;
  attached.veth = veth;
  attached.undo.push_back({"ip", "link", "del", veth});
  for (const Command& r : routes) attached.undo.push_back({"ip", "route", "del", r[3], "via", r[5]});
  for (const auto& rule : filter) {
    Command c = Iptables({"-D", filter_chain_});
    c.insert(c.end(), rule.begin(), rule.end());
    attached.undo.push_back(std::move(c));
  }
  if (!allow_.empty()) {
    Command c = Iptables({"-t", "nat", "-D", nat_chain_});
    c.insert(c.end(), nat.begin(), nat.end());
    attached.undo.push_back(std::move(c));
  }
  const std::string undo_file = absl::StrCat(state_dir_, "/", veth, ".undo");
  RETURN_IF_ERROR(WriteUndoFile(undo_file, attached.undo));

  absl::Status s = [&]() -> absl::Status {
    RETURN_IF_ERROR(Run({"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
                         std::to_string(holder)}));
    // IPv6 off on both sides, so that no link-local address reaches the host.
    std::string v6 = absl::StrCat("/proc/sys/net/ipv6/conf/", veth, "/disable_ipv6");
    if (access(v6.c_str(), F_OK) == 0) RETURN_IF_ERROR(WriteSysctl(v6, "1"));
    std::string mac;
    {
      std::ifstream f(absl::StrCat("/sys/class/net/", veth, "/address"));
      std::getline(f, mac);
    }
    if (mac.size() != 17) return absl::InternalError(absl::StrCat("cannot read the MAC address of ", veth));
    RETURN_IF_ERROR(Run({"ip", "link", "set", veth, "up"}));
    RETURN_IF_ERROR(Run(inside({"addr", "add", address, "dev", "eth0"})));
    RETURN_IF_ERROR(Run(inside({"link", "set", "eth0", "up"})));
    RETURN_IF_ERROR(Run(inside({"route", "add", kGateway, "dev", "eth0", "scope", "link"})));
    RETURN_IF_ERROR(Run(inside({"neigh", "replace", kGateway, "lladdr", mac, "dev", "eth0", "nud", "permanent"})));
    RETURN_IF_ERROR(Run(inside({"route", "add", "default", "via", kGateway, "dev", "eth0"})));
    RETURN_IF_ERROR(Run({"ip", "route", "replace", address, "dev", veth}));
    for (const Command& r : routes) RETURN_IF_ERROR(Run(r));
    for (const auto& rule : filter) {
      Command c = Iptables({"-A", filter_chain_});
      c.insert(c.end(), rule.begin(), rule.end());
      RETURN_IF_ERROR(Run(c));
    }
    if (!allow_.empty()) {
      Command c = Iptables({"-t", "nat", "-A", nat_chain_});
      c.insert(c.end(), nat.begin(), nat.end());
      RETURN_IF_ERROR(Run(c));
    }
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    RunUndoFile(undo_file, false);
    return absl::FailedPreconditionError(absl::StrCat("cannot join the job network ", subnet, ": ", s.message()));
  }
  ATHANOR_LOG(DEBUG) << "job network: box " << box << " at " << spec.address << " (" << veth << "), "
                     << routes.size() << " peer route(s)";
  boxes_.emplace(box, std::move(attached));
  return absl::OkStatus();
}

void JobNetworkHost::Detach(const std::string& box) {
  auto it = boxes_.find(box);
  if (it == boxes_.end()) return;
  RunAll(it->second.undo);
  unlink(absl::StrCat(state_dir_, "/", it->second.veth, ".undo").c_str());
  boxes_.erase(it);
}

}  // namespace athanor::agent
