// Test support: a real etcd cluster (Debian's etcd-server, /usr/bin/etcd) of
// N members on loopback, for the coordinator's etcd client, store and
// leader election tests.
//
// Each member listens on free loopback ports (client and peer), keeps its
// data in DIR/m<i> and logs to DIR/m<i>.log; timings are short (heartbeat
// 50 ms, election 500 ms) so that a lost leader is replaced within a second,
// and the request limits are the ones athanor documents for production
// (--max-txn-ops 4096, --max-request-bytes 32 MiB). Start waits until every
// member answers a linearizable read (which needs a leader and a quorum).
//
// Absence of /usr/bin/etcd is an error (FailedPrecondition naming the Debian
// package), never a reason to skip: scripts/install-test-tools installs it.
//
// Thread model: owned by one thread, which must outlive the cluster (the
// members get SIGKILL when the thread that started them ends: a test killed
// by its watchdog leaves no etcd behind). The destructor SIGKILLs and reaps
// every member.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace athanor::testing_etcd {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

class EtcdCluster {
 public:
  // Starts `members` members with their data under `dir` (created when
  // missing; empty: a new /tmp/etcd-cluster.XXXXXX, removed by the
  // destructor) and waits up to `ready_timeout` for all of them. With
  // `also_listen_on` (an IPv4 address of this host), members take clients on
  // that address too, on the same ports (a network namespace's host reaching
  // them over its veth).
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      int members, const std::string& dir = "",
      std::chrono::milliseconds ready_timeout = std::chrono::seconds(30), const std::string& also_listen_on = "");
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:PORT" of each member's client port, in member order.
  std::vector<std::string> endpoints() const;
  // etcd://<every endpoint>/<prefix> (prefix without its leading '/').
  std::string uri(const std::string& prefix = "athanor") const;
  const std::string& dir() const { return dir_; }

  // SIGKILL member `i` and reap it (OK when it is not running).
  absl::Status Kill(int i);
  // Starts member `i` again on its data and ports, and waits up to
  // `ready_timeout` until it answers a linearizable read.
  absl::Status Restart(int i, std::chrono::milliseconds ready_timeout = std::chrono::seconds(30));
  bool running(int i) const { return members_.at(i).child != nullptr; }
  pid_t pid(int i) const;  // 0 when not running
  // The last `max_bytes` of member `i`'s log.
  std::string LogTail(int i, size_t max_bytes = 3000) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<Subprocess> child;
  };
  EtcdCluster() = default;
  absl::Status Launch(int i);
  absl::Status WaitReady(int i, std::chrono::steady_clock::time_point deadline);

  std::string dir_;
  bool remove_dir_ = false;
  std::string also_listen_on_;
  std::string token_;            // --initial-cluster-token
  std::string initial_cluster_;  // m0=http://127.0.0.1:P0,...
  std::vector<Member> members_;
};

}  // namespace athanor::testing_etcd
