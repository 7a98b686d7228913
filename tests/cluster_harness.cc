#include "tests/cluster_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"
#include "security/tls.h"
#include "security/tls_client.h"

namespace athanor::testing {
namespace {

constexpr int kWatchdogSeconds = 100;

// Children the watchdog must stop; async-signal-safe to read.
std::array<std::atomic<pid_t>, 64> g_children;

void OnWatchdog(int) {
  static const char kMsg[] = "\ncluster test watchdog: hung test, stopping children\n";
  ssize_t unused = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  (void)unused;
  for (auto& pid : g_children) {
    pid_t p = pid.load();
    if (p > 0) kill(p, SIGTERM);  // agents SIGKILL their ranks on SIGTERM
  }
  _exit(99);
}

// Each cluster gets the whole budget: a test binary with several clusters
// in turn (hang_test runs two) is not cut short by the earlier ones.
void ArmWatchdog() {
  static bool handler = false;
  if (!handler) {
    handler = true;
    signal(SIGALRM, OnWatchdog);
  }
  alarm(kWatchdogSeconds);
}

void Untrack(pid_t pid) {
  for (auto& p : g_children) {
    pid_t expected = pid;
    p.compare_exchange_strong(expected, 0);
  }
}

void Stop(std::unique_ptr<Subprocess>& p, int sig) {
  if (!p) return;
  p->Signal(sig).IgnoreError();
  p->Wait();
  Untrack(p->pid());
  p.reset();
}

// The last `bytes` of a log file.
std::string LogTail(const std::string& path, size_t bytes = 3000);

}  // namespace

int PickUnusedPort() {
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> lock(mu);
  for (int tries = 0; tries < 64; ++tries) {
    int port = PickFreePort().value();
    if (given.insert(port).second) return port;
  }
  ADD_FAILURE() << "no unused free port in 64 tries";
  return 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ProbeLine(const std::string& log, const std::string& attempt) {
  size_t at = log.find(attempt + ": ");
  if (at == std::string::npos) return "missing";
  size_t from = at + attempt.size() + 2;
  return log.substr(from, log.find('\n', from) - from);
}

pid_t RankHostPid(const std::string& node_dir, const std::string& id) {
  std::ifstream in(absl::StrCat(node_dir, "/run/", id, ".1.0.pid"));
  pid_t helper = 0;
  in >> helper;
  std::ifstream children(absl::StrCat("/proc/", helper, "/task/", helper, "/children"));
  pid_t child = 0;
  children >> child;
  return child;
}

void LocalCluster::RearmWatchdog() { ArmWatchdog(); }

LocalCluster::LocalCluster(std::vector<std::string> coordinator_flags)
    : coordinator_flags_(std::move(coordinator_flags)), sandboxed_(geteuid() == 0) {
  ArmWatchdog();
  char dir[] = "/tmp/athanor_cluster_test.XXXXXX";
  dir_ = mkdtemp(dir);
  chmod(dir_.c_str(), 01777);  // sandboxed ranks (tenant uids) write test outputs here
  // One cluster key: sandboxed attempts rendezvous with their own secrets.
  std::ofstream(dir_ + "/cluster.key") << "harness-cluster-key-" << getpid();
  chmod((dir_ + "/cluster.key").c_str(), 0600);  // root's: ranks share dir_
  const char* bin = getenv("ATHANOR_BIN_DIR");
  bin_dir_ = bin != nullptr ? bin : "";
  int port = PickUnusedPort();
  address_ = absl::StrCat("127.0.0.1:", port);
  secure_ = std::find(coordinator_flags_.begin(), coordinator_flags_.end(), "--insecure") ==
            coordinator_flags_.end();
  if (secure_) {
    absl::Status ca = security::InitClusterCa(tls_dir());
    EXPECT_TRUE(ca.ok()) << ca;
    absl::StatusOr<std::string> token = security::ReadPrivateFile(tls_dir() + "/admin.token");
    EXPECT_TRUE(token.ok()) << token.status();
    if (token.ok()) admin_token_ = std::string(absl::StripAsciiWhitespace(*token));
  }
  stub_ = rpc::Coordinator::NewStub(Channel(admin_token_, ""));
}

std::shared_ptr<grpc::Channel> LocalCluster::Channel(const std::string& token,
                                                     const std::string& cert_base) {
  grpc::ChannelArguments args;  // reconnect at once after coordinator (re)starts
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 50);
  if (!secure_) return grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(tls_dir(), cert_base);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  return grpc::CreateCustomChannel(
      address_, security::ClientCredentials(*m, security::kCoordinatorName, token, &args), args);
}

std::unique_ptr<rpc::Coordinator::Stub> LocalCluster::CoordinatorStubAs(const std::string& token) {
  return rpc::Coordinator::NewStub(Channel(token, ""));
}

std::unique_ptr<rpc::Billing::Stub> LocalCluster::BillingStubAs(const std::string& token) {
  return rpc::Billing::NewStub(Channel(token, ""));
}

std::unique_ptr<rpc::NodeAgent::Stub> LocalCluster::AgentStub(const std::string& node) {
  if (secure_ && !node.empty()) {
    struct stat st;
    if (stat((tls_dir() + "/agent-" + node + ".crt").c_str(), &st) != 0) {
      absl::Status s = security::IssueAgentCertificate(tls_dir(), node);
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  return rpc::NodeAgent::NewStub(Channel("", node.empty() ? "" : "agent-" + node));
}

std::vector<std::string> LocalCluster::AgentSecurityFlags(const std::string& node, uid_t owner) {
  if (!secure_) return {"--insecure"};
  absl::Status s = security::IssueAgentCertificate(tls_dir(), node);
  EXPECT_TRUE(s.ok()) << s;
  if (owner == geteuid()) return {"--tls-dir", tls_dir()};
  std::string own = absl::StrCat(dir_, "/tls-", node);
  mkdir(own.c_str(), 0700);
  for (const std::string& f : {std::string("ca.crt"), "agent-" + node + ".crt", "agent-" + node + ".key"}) {
    std::string to = own + "/" + f;
    std::ofstream(to) << ReadFile(tls_dir() + "/" + f);
    chmod(to.c_str(), 0600);
    EXPECT_EQ(chown(to.c_str(), owner, static_cast<gid_t>(-1)), 0) << to;
  }
  EXPECT_EQ(chown(own.c_str(), owner, static_cast<gid_t>(-1)), 0) << own;
  return {"--tls-dir", own};
}

std::string LocalCluster::CreateToken(const std::string& tenant, const std::string& role,
                                      const std::string& ttl) {
  std::vector<std::string> args = {"admin", "token", "create", "--tenant", tenant, "--role", role};
  if (!ttl.empty()) args.insert(args.end(), {"--ttl", ttl});
  CliResult r = Cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripAsciiWhitespace(r.out));
}

LocalCluster::~LocalCluster() {
  for (auto& [name, agent] : agents_) Stop(agent, SIGTERM);
  Stop(coordinator_, SIGTERM);
}

std::string LocalCluster::Bin(const std::string& name) const {
  return bin_dir_.empty() ? name : absl::StrCat(bin_dir_, "/", name);
}

void LocalCluster::Track(Subprocess* p) {
  for (auto& slot : g_children) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, p->pid())) return;
  }
}

void LocalCluster::StartCoordinator() {
  ASSERT_EQ(coordinator_, nullptr);
  SubprocessOptions o;
  std::string state = dir_ + "/state.db";
  const char* backend = getenv("ATHANOR_TEST_STATE");
  const bool on_etcd = backend != nullptr && std::string(backend) == "etcd";
  if (on_etcd) {
    if (etcd_ == nullptr) {  // once: a restarted coordinator finds its state again
      absl::StatusOr<std::unique_ptr<testing_etcd::EtcdCluster>> etcd =
          testing_etcd::EtcdCluster::Start(1, dir_ + "/etcd");
      ASSERT_TRUE(etcd.ok()) << etcd.status();
      etcd_ = std::move(*etcd);
    }
    state = etcd_->uri("athanor-test");
  }
  o.argv = {Bin("athanor-coordinator"), "--listen", address_, "--state", state, "--heartbeat-interval-ms", "500"};
  if (on_etcd) {
    o.argv.insert(o.argv.end(), {"--local-dir", dir_ + "/coordinator-local", "--etcd-lease-ttl-s", "1",
                                 "--etcd-max-txn-ops", "4096"});
  }
  if (secure_) o.argv.insert(o.argv.end(), {"--tls-dir", tls_dir()});
  o.argv.insert(o.argv.end(), coordinator_flags_.begin(), coordinator_flags_.end());
  if (!http_address_.empty()) o.argv.insert(o.argv.end(), {"--http-listen", http_address_});
  o.stdout_path = dir_ + "/coordinator.log";
  o.stderr_path = "=stdout";
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  coordinator_ = std::move(*p);
  Track(coordinator_.get());
  // Ready once it answers.
  bool up = WaitFor([&] {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    rpc::ListNodesResponse r;
    return stub_->ListNodes(&c, rpc::ListNodesRequest(), &r).ok();
  });
  ASSERT_TRUE(up) << "coordinator did not come up:\n" << CoordinatorLog();
}

void LocalCluster::KillCoordinator() { Stop(coordinator_, SIGKILL); }

void LocalCluster::StartAgent(const std::string& name, int gpus, const std::string& host,
                              const std::vector<std::string>& extra_flags) {
  SubprocessOptions o;
  o.argv = {Bin("athanor-agent"), "--coordinator", address_, "--name", name, "--gpus",
            std::to_string(gpus), "--work-dir", dir_ + "/" + name, "--listen", host + ":0",
            "--host", host};
  if (secure_) {
    absl::Status s = security::IssueAgentCertificate(tls_dir(), name);
    ASSERT_TRUE(s.ok()) << s;
    o.argv.insert(o.argv.end(), {"--tls-dir", tls_dir()});
  } else {
    o.argv.push_back("--insecure");
  }
  if (sandboxed_) {
    if (share_dir_) o.argv.insert(o.argv.end(), {"--sandbox-shared-dir", dir_});
    // The binaries ranks run: a checkout under /tmp is hidden by the
    // sandbox's private /tmp otherwise.
    if (!bin_dir_.empty()) o.argv.insert(o.argv.end(), {"--sandbox-shared-dir", bin_dir_});
    if (std::find(extra_flags.begin(), extra_flags.end(), "--rendezvous-key-file") == extra_flags.end()) {
      o.argv.insert(o.argv.end(), {"--rendezvous-key-file", dir_ + "/cluster.key"});
    }
  } else {
    o.argv.push_back("--no-sandbox");
  }
  if (!http_address_.empty()) {
    std::string& metrics = agent_metrics_[name];
    if (metrics.empty()) metrics = absl::StrCat("127.0.0.1:", PickUnusedPort());
    o.argv.insert(o.argv.end(), {"--metrics-listen", metrics});
  }
  o.argv.insert(o.argv.end(), extra_flags.begin(), extra_flags.end());
  o.stdout_path = dir_ + "/agent-" + name + ".log";
  o.stderr_path = "=stdout";
  const size_t log_before = ReadFile(o.stdout_path).size();  // the log is appended to
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  Track(p->get());
  agents_[name] = std::move(*p);
  if (http_address_.empty()) return;
  // The metrics port was free when picked, but another process (a daemon's
  // own loopback listener on port 0) may take it before this agent binds it:
  // then the agent exits naming --metrics-listen, and starts again on another.
  // Its own log says which: "serving /metrics on", or the exit.
  std::optional<ExitInfo> exited;
  bool listening = WaitFor([&] {
    exited = agents_[name]->Poll();
    return exited.has_value() ||
           ReadFile(o.stdout_path).find("serving /metrics on", log_before) != std::string::npos;
  });
  ASSERT_TRUE(listening) << "agent " << name << " neither served /metrics nor exited:\n" << LogTail(o.stdout_path);
  if (!exited) return;
  const std::string log = ReadFile(o.stdout_path).substr(log_before);
  ASSERT_NE(log.find("--metrics-listen: "), std::string::npos)
      << "agent " << name << " exited at start (" << exited->ToString() << "):\n" << LogTail(o.stdout_path);
  ASSERT_LT(++metrics_port_retries_, 3) << "agent " << name << ": no metrics port could be bound:\n" << log;
  Untrack(agents_[name]->pid());
  agents_.erase(name);
  agent_metrics_.erase(name);
  StartAgent(name, gpus, host, extra_flags);
}

void LocalCluster::EnableHttp() {
  if (http_address_.empty()) http_address_ = absl::StrCat("127.0.0.1:", PickUnusedPort());
}

std::string LocalCluster::agent_metrics_address(const std::string& name) const {
  auto it = agent_metrics_.find(name);
  return it == agent_metrics_.end() ? "" : it->second;
}

HttpResult LocalCluster::HttpGet(const std::string& address, const std::string& path) {
  HttpResult result;
  // The cluster's own endpoints speak HTTPS on a secure cluster, with the
  // coordinator's or the node's certificate.
  std::string server_name;
  if (secure_ && address == http_address_) server_name = security::kCoordinatorName;
  for (const auto& [node, metrics] : agent_metrics_) {
    if (secure_ && address == metrics) server_name = security::AgentName(node);
  }
  const bool token = secure_ && address == http_address_;
  std::string req = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", address, "\r\nConnection: close\r\n",
                                 token ? absl::StrCat("Authorization: Bearer ", admin_token_, "\r\n") : "", "\r\n");
  std::string raw;
  if (!server_name.empty()) {
    absl::StatusOr<std::string> answer =
        security::TlsExchange(address, ReadFile(tls_dir() + "/ca.crt"), server_name, req);
    if (!answer.ok()) return result;
    raw = std::move(*answer);
  } else {
    size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return result;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return result;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
    timeval tv{10, 0};  // a hung server fails the read, not the test binary
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      close(fd);
      return result;
    }
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) raw.append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return result;
  absl::SimpleAtoi(raw.substr(9, 3), &result.status);
  result.body = raw.substr(head_end + 4);
  return result;
}

void LocalCluster::KillAgent(const std::string& name) { Stop(agents_[name], SIGKILL); }

pid_t LocalCluster::agent_pid(const std::string& name) const {
  auto it = agents_.find(name);
  return it == agents_.end() || !it->second ? 0 : it->second->pid();
}

CliResult LocalCluster::Cli(const std::vector<std::string>& args) { return RunCli(args, admin_token_); }

CliResult LocalCluster::CliAs(const std::string& token, const std::vector<std::string>& args) {
  return RunCli(args, token);
}

CliResult LocalCluster::CliPlaintext(const std::vector<std::string>& args) {
  return RunCli(args, "", /*tls=*/false);
}

CliResult LocalCluster::RunCli(const std::vector<std::string>& args, const std::string& token, bool tls) {
  SubprocessOptions o;
  o.argv = {Bin("athanor"), "--coordinator", address_};
  if (secure_ && tls) o.argv.insert(o.argv.end(), {"--ca", tls_dir() + "/ca.crt"});
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  // The token travels in the environment, never on a command line.
  o.env["ATHANOR_TOKEN"] = token;
  o.capture_stdout = true;
  std::string err_path = dir_ + "/cli.err";
  unlink(err_path.c_str());
  o.stderr_path = err_path;
  CliResult r;
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    r.err = std::string(p.status().message());
    return r;
  }
  r.out = (*p)->ReadAllStdout();
  r.exit_code = (*p)->Wait().exit_code;
  r.err = ReadFile(err_path);
  return r;
}

rpc::Job LocalCluster::GetJob(const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  rpc::GetJobRequest req;
  req.set_job_id(id);
  rpc::Job job;
  grpc::Status s = stub_->GetJob(&ctx, req, &job);
  EXPECT_TRUE(s.ok()) << "GetJob " << id << ": " << s.error_message();
  return job;
}

bool LocalCluster::WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Polls another process's state, which offers no event to wait on; bounded by the deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); /* sleep override */
  }
  return true;
}

bool LocalCluster::WaitForNodesUp(int n) {
  int up = 0;
  bool ok = WaitFor([&] {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    rpc::ListNodesResponse r;
    if (!stub_->ListNodes(&c, rpc::ListNodesRequest(), &r).ok()) return false;
    up = 0;
    for (const rpc::Node& node : r.nodes()) up += node.state() == rpc::NODE_UP;
    return up == n;
  });
  if (ok) return true;
  // Say why: which agent exited, and the ends of the logs.
  std::cerr << "WaitForNodesUp(" << n << "): " << up << " node(s) up after the deadline\n";
  for (auto& [name, agent] : agents_) {
    std::optional<ExitInfo> exit = agent ? agent->Poll() : std::nullopt;
    std::cerr << "--- agent " << name << (exit ? absl::StrCat(" exited: ", exit->ToString()) : " still running")
              << ", log tail:\n"
              << LogTail(dir_ + "/agent-" + name + ".log") << "\n";
  }
  std::cerr << "--- coordinator log tail:\n" << LogTail(dir_ + "/coordinator.log") << "\n";
  return false;
}

std::string LocalCluster::CoordinatorLog() const { return ReadFile(dir_ + "/coordinator.log"); }

namespace {
std::string LogTail(const std::string& path, size_t bytes) {
  std::string text = ReadFile(path);
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}
}  // namespace

}  // namespace athanor::testing
