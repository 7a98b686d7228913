#include "testing/etcd/etcd_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "coordinator/store/etcd/etcd_client.h"

namespace athanor::testing_etcd {
namespace {

std::string Url(int port) { return absl::StrCat("http://127.0.0.1:", port); }

// Whether something accepts TCP connections on 127.0.0.1:`port` now.
bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(
    int members, const std::string& dir, std::chrono::milliseconds ready_timeout, const std::string& also_listen_on) {
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcdBinary, " is missing: install Debian's etcd-server (scripts/install-test-tools)"));
  }
  if (members < 1 || members > 9) {
    return absl::InvalidArgumentError(absl::StrCat("etcd cluster of ", members, " members"));
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  cluster->also_listen_on_ = also_listen_on;
  if (dir.empty()) {
    std::string tmpl = "/tmp/etcd-cluster.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", strerror(errno)));
    }
    cluster->dir_ = tmpl;
    cluster->remove_dir_ = true;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
    cluster->dir_ = dir;
  }
  // A token of its own, so that members of two clusters never join up.
  cluster->token_ = absl::StrCat("athanor-test-", std::random_device{}());
  std::vector<std::string> peers;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = absl::StrCat("m", i);
    absl::StatusOr<int> client_port = PickFreePort();
    if (!client_port.ok()) return client_port.status();
    absl::StatusOr<int> peer_port = PickFreePort();
    if (!peer_port.ok()) return peer_port.status();
    // PickFreePort may hand back the same port twice in a row.
    if (*peer_port == *client_port) {
      return absl::UnavailableError(absl::StrCat("free port ", *peer_port, " picked twice"));
    }
    m.client_port = *client_port;
    m.peer_port = *peer_port;
    peers.push_back(absl::StrCat(m.name, "=", Url(m.peer_port)));
    cluster->members_.push_back(std::move(m));
  }
  cluster->initial_cluster_ = absl::StrJoin(peers, ",");
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = cluster->Launch(i); !s.ok()) return s;
  }
  const auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = cluster->WaitReady(i, deadline); !s.ok()) return s;
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) (void)Kill(i);  // Kill only fails on a child it reaps anyway
  if (remove_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);  // best effort: /tmp is cleaned anyway
  }
}

absl::Status EtcdCluster::Launch(int i) {
  Member& m = members_.at(i);
  SubprocessOptions o;
  o.argv = {kEtcdBinary,
            "--name", m.name,
            "--data-dir", absl::StrCat(dir_, "/", m.name),
            "--listen-client-urls",
            also_listen_on_.empty()
                ? Url(m.client_port)
                : absl::StrCat(Url(m.client_port), ",http://", also_listen_on_, ":", m.client_port),
            "--advertise-client-urls", Url(m.client_port),
            "--listen-peer-urls", Url(m.peer_port),
            "--initial-advertise-peer-urls", Url(m.peer_port),
            "--initial-cluster", initial_cluster_,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", token_,
            "--heartbeat-interval", "50",
            "--election-timeout", "500",
            "--max-txn-ops", "4096",
            "--max-request-bytes", "33554432",
            "--logger", "zap",
            "--log-outputs", "stderr"};
  o.stdout_path = absl::StrCat(dir_, "/", m.name, ".log");
  o.stderr_path = "=stdout";
  o.parent_death_signal = SIGKILL;
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Start(o);
  if (!child.ok()) return child.status();
  m.child = std::move(*child);
  return absl::OkStatus();
}

absl::Status EtcdCluster::WaitReady(int i, std::chrono::steady_clock::time_point deadline) {
  Member& m = members_.at(i);
  coord::etcd::EtcdUri uri;
  uri.endpoints = {absl::StrCat("127.0.0.1:", m.client_port)};
  uri.prefix = "/etcd-cluster";
  // The client dials only once the member listens: a gRPC channel whose
  // first connection is refused backs off, and its later tries came seconds
  // after etcd served (about 9 s of every start).
  while (!Accepts(m.client_port)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("etcd member ", m.name, " never listened on its client port ",
                                                      m.client_port, "; log: ", LogTail(i)));
    }
    if (std::optional<ExitInfo> exit = m.child->Poll()) {
      m.child.reset();
      return absl::UnavailableError(absl::StrCat("etcd member ", m.name, " exited (", exit->ToString(),
                                                 "): ", LogTail(i)));
    }
    // etcd gives no event for "listening"; its start takes tens of ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); /* sleep override: etcd is another process */
  }
  // Each probe retries for up to half a second on its own (the client
  // pauses between refused attempts), so this loop needs no sleep.
  absl::StatusOr<std::unique_ptr<coord::etcd::EtcdClient>> client =
      coord::etcd::EtcdClient::Create(uri, {}, std::chrono::milliseconds(500));
  if (!client.ok()) return client.status();
  absl::Status last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<ExitInfo> exit = m.child->Poll()) {
      m.child.reset();
      return absl::UnavailableError(absl::StrCat("etcd member ", m.name, " exited (", exit->ToString(),
                                                 "): ", LogTail(i)));
    }
    // A linearizable read: answered only with a leader and a quorum.
    absl::StatusOr<coord::etcd::RangeResult> r = (*client)->Range("/etcd-cluster-probe");
    if (r.ok()) return absl::OkStatus();
    last = r.status();
    if (!absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) {
      // etcd, still starting, refused the read at once (the client only waits
      // on unreachable members): poll again shortly, as etcd gives no event.
      std::this_thread::sleep_for(std::chrono::milliseconds(50)); /* sleep override */
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("etcd member ", m.name, " not ready: ",
                                                  last.ToString(), "; log: ", LogTail(i)));
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(absl::StrCat("127.0.0.1:", m.client_port));
  return out;
}

std::string EtcdCluster::uri(const std::string& prefix) const {
  std::string p = prefix;
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  return absl::StrCat("etcd://", absl::StrJoin(endpoints(), ","), "/", p);
}

absl::Status EtcdCluster::Kill(int i) {
  Member& m = members_.at(i);
  if (m.child == nullptr) return absl::OkStatus();
  absl::Status s = m.child->Signal(SIGKILL);
  m.child->Wait();
  m.child.reset();
  return s;
}

absl::Status EtcdCluster::Restart(int i, std::chrono::milliseconds ready_timeout) {
  if (members_.at(i).child != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("etcd member m", i, " is running"));
  }
  if (absl::Status s = Launch(i); !s.ok()) return s;
  return WaitReady(i, std::chrono::steady_clock::now() + ready_timeout);
}

pid_t EtcdCluster::pid(int i) const {
  const Member& m = members_.at(i);
  return m.child == nullptr ? 0 : m.child->pid();
}

std::string EtcdCluster::LogTail(int i, size_t max_bytes) const {
  std::ifstream in(absl::StrCat(dir_, "/", members_.at(i).name, ".log"), std::ios::binary);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return log.size() > max_bytes ? log.substr(log.size() - max_bytes) : log;
}

}  // namespace athanor::testing_etcd
