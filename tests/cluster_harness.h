// A local athanor cluster for integration tests: one coordinator and N agents
// as real processes on loopback, plus the `athanor` CLI, all found through
// $ATHANOR_BIN_DIR. Ports are picked with PickUnusedPort; everything lives in a
// fresh temp dir. Every cluster is secure, as in production: a cluster CA in
// DIR/tls (coordinator and agent certificates, mutual TLS), and the harness's
// own calls (stub(), Cli()) carry the bootstrap admin token; CreateToken makes
// tenants' tokens. Passing "--insecure" among the coordinator flags runs a
// plaintext, unauthenticated cluster instead. The destructor stops every child (agents SIGTERM their
// ranks). A process-wide watchdog (alarm, 100 s from the
// newest cluster's construction or RearmWatchdog()) kills the children and
// fails the test binary if a test hangs. Not thread-safe: one test thread drives it.
//
// With ATHANOR_TEST_STATE=etcd in the environment, the coordinator keeps its
// state on a real one-member etcd (Debian's etcd-server, started by the
// cluster) instead of SQLite, with a 1 s leader lease, so that a test of the
// SQLite coordinator also runs against the etcd store (tests/CMakeLists.txt
// adds such runs as <test>_on_etcd).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "proto/athanor.grpc.pb.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

struct HttpResult {
  int status = 0;  // 0: no answer
  std::string body;
};

class LocalCluster {
 public:
  // `coordinator_flags` are appended to the coordinator's command line.
  explicit LocalCluster(std::vector<std::string> coordinator_flags = {});
  ~LocalCluster();

  void StartCoordinator();               // on the same --state every time
  void KillCoordinator();                // SIGKILL, as a crash would
  // `extra_flags` are appended to the agent's command line.
  void StartAgent(const std::string& name, int gpus, const std::string& host = "127.0.0.1",
                  const std::vector<std::string>& extra_flags = {});
  void KillAgent(const std::string& name);  // SIGKILL
  // Agents started from now on run ranks unsandboxed (--no-sandbox). As root
  // they are sandboxed by default, with the cluster's temp dir shared
  // writable into every sandbox and one cluster key for rendezvous secrets;
  // as any other user they cannot be sandboxed.
  void DisableSandbox() { sandboxed_ = false; }
  bool sandboxed() const { return sandboxed_; }
  // Agents started from now on do not share the temp dir with their ranks.
  void KeepDirFromRanks() { share_dir_ = false; }
  // Observability over HTTP: a coordinator started from now on serves
  // /metrics, the dashboard and its API on http_address(); agents started
  // from now on serve /metrics on agent_metrics_address(name). Free ports.
  void EnableHttp();
  const std::string& http_address() const { return http_address_; }
  std::string agent_metrics_address(const std::string& name) const;
  // GET on `address`, as the cluster's clients reach it: the endpoints above
  // speak HTTPS on a secure cluster (verified against the CA and the
  // coordinator's or the node's certificate name), and the coordinator's
  // gets the admin token as a bearer token. Any other address: plain HTTP.
  HttpResult HttpGet(const std::string& address, const std::string& path);
  std::string http_base() const { return (secure_ ? "https://" : "http://") + http_address_; }
  const std::string& admin_token() const { return admin_token_; }
  // A helper process of the test (a metrics server, a browser) that the
  // watchdog must stop too (tracked until the test binary exits).
  void TrackHelper(Subprocess* p) { Track(p); }

  // The agent's pid (0 when it is not running).
  pid_t agent_pid(const std::string& name) const;

  // Runs `athanor --coordinator ADDR args...` to completion, as the admin.
  CliResult Cli(const std::vector<std::string>& args);
  // The same with `token` ($ATHANOR_TOKEN) instead of the admin's.
  CliResult CliAs(const std::string& token, const std::vector<std::string>& args);

  // The same without the CA: a plaintext call (with no token).
  CliResult CliPlaintext(const std::vector<std::string>& args);

  // A new bearer token for `tenant` (made through the admin CLI; fails the
  // test and returns "" if that fails).
  std::string CreateToken(const std::string& tenant, const std::string& role = "user",
                          const std::string& ttl = "");
  // A Coordinator stub calling with `token` ("" for none) over verified TLS.
  std::unique_ptr<rpc::Coordinator::Stub> CoordinatorStubAs(const std::string& token);
  // The same for the Billing service.
  std::unique_ptr<rpc::Billing::Stub> BillingStubAs(const std::string& token);
  // A NodeAgent stub presenting node `node`'s agent certificate ("" for no
  // certificate), issued on first use.
  std::unique_ptr<rpc::NodeAgent::Stub> AgentStub(const std::string& node);
  // The flags an agent of node `node` needs to reach this cluster (its
  // certificate is issued on first use): "--tls-dir DIR", or "--insecure". For
  // an agent running as another uid, the certificate, key and CA are copied
  // into a folder of that uid's own.
  std::vector<std::string> AgentSecurityFlags(const std::string& node, uid_t owner = geteuid());
  // Where the CA, the certificates and admin.token are ("" when --insecure).
  std::string tls_dir() const { return secure_ ? dir_ + "/tls" : ""; }

  // Polls `cond` every 20 ms until it holds or `timeout` passes.
  // Gives the running test a fresh watchdog budget (100 s from now): for a
  // test made of many steps, each bounded by its own waits, so that the
  // budget bounds one step rather than the whole series.
  static void RearmWatchdog();
  static bool WaitFor(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits until `n` nodes are UP.
  bool WaitForNodesUp(int n);

  rpc::Coordinator::Stub& stub() { return *stub_; }
  // The job as the coordinator has it now (a default Job, with a test failure, if the RPC fails).
  rpc::Job GetJob(const std::string& id);
  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }
  // A file in the binaries' folder (ATHANOR_BIN_DIR), which sandboxed ranks see.
  std::string BinFile(const std::string& name) const { return Bin(name); }
  // The coordinator's SQLite file holding tokens and tenants' credentials:
  // its state file, or with ATHANOR_TEST_STATE=etcd its --local-dir's local.db.
  std::string credentials_db() const {
    return etcd_ != nullptr ? dir_ + "/coordinator-local/local.db" : dir_ + "/state.db";
  }
  // The coordinator's log so far, for failure messages.
  std::string CoordinatorLog() const;

 private:
  std::string Bin(const std::string& name) const;
  std::shared_ptr<grpc::Channel> Channel(const std::string& token, const std::string& cert_base);
  CliResult RunCli(const std::vector<std::string>& args, const std::string& token, bool tls = true);
  void Track(Subprocess* p);

  std::string dir_;
  std::string bin_dir_;
  std::string address_;
  std::vector<std::string> coordinator_flags_;
  bool sandboxed_;
  bool share_dir_ = true;
  bool secure_ = true;
  std::string admin_token_;
  std::string http_address_;                          // empty: no HTTP
  std::map<std::string, std::string> agent_metrics_;  // agent name -> HOST:PORT
  std::unique_ptr<testing_etcd::EtcdCluster> etcd_;  // ATHANOR_TEST_STATE=etcd
  std::unique_ptr<Subprocess> coordinator_;
  std::map<std::string, std::unique_ptr<Subprocess>> agents_;
  int metrics_port_retries_ = 0;
  std::unique_ptr<rpc::Coordinator::Stub> stub_;
};

// Reads a whole file ("" when missing).
std::string ReadFile(const std::string& path);

// The result sandbox_probe printed for `attempt` in `log` ("<attempt>: <result>"
// lines; "missing" when none).
std::string ProbeLine(const std::string& log, const std::string& attempt);

// Host pid of the rank process of attempt 1, rank 0 of job `id` on the agent
// whose work dir is `node_dir` (the sandbox helper's child); 0 when not found.
pid_t RankHostPid(const std::string& node_dir, const std::string& id);

// A free port that this test process has not handed out before: two ports
// picked back to back (one agent's metrics port, then the next agent's) are
// never the same one, even before the first is bound.
int PickUnusedPort();

}  // namespace athanor::testing
