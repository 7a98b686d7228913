// A leader cut off from etcd by its network: a real 3-member etcd cluster on
// this host, and a candidate whose every connection to it crosses a network
// namespace's veth (through tests/ha/tcp_relay.py, which runs inside the
// namespace). It leads; then the veth's host end is taken down, as a
// machine losing its link. The test shows:
//   - the cut-off leader gives up (on_lost) within its lease's ttl, and
//     before a second candidate, still connected, is elected with a later
//     term (never two leaders at once);
//   - once the link is back, a write of the old leader (its store, under its
//     fence) is refused by etcd itself (FAILED_PRECONDITION "fenced: ..."),
//     and none of it is visible; what it wrote before the cut stays.
//
// Needs root (ip netns, veth). Without root it skips, unless
// ATHANOR_REQUIRE_NETNS is set (scripts/test sets it as root), when that is
// a failure. A watchdog fails the binary if anything hangs; the relay and the
// etcd members die with the test (PR_SET_PDEATHSIG).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/subprocess.h"
#include "coordinator/store/etcd/etcd_client.h"
#include "coordinator/store/etcd/etcd_store.h"
#include "coordinator/store/etcd/leader_election.h"
#include "testing/coordinator/watchdog.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor::coord::etcd {
namespace {

using ::athanor::testing_etcd::EtcdCluster;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kTtl{2};
const char kPrefix[] = "/athanor-cut";

// Runs a command to its end; an error naming it and its exit unless it exits 0.
absl::Status Run(const std::vector<std::string>& argv) {
  SubprocessOptions o;
  o.argv = argv;
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  const ExitInfo e = (*p)->Wait();
  if (e.exit_code != 0) return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), ": ", e.ToString()));
  return absl::OkStatus();
}

// A network namespace joined to this host by a veth pair, /30 on each end.
// Deleting the namespace (the destructor) deletes the pair.
class NamespaceLink {
 public:
  static absl::StatusOr<std::unique_ptr<NamespaceLink>> Create() {
    std::unique_ptr<NamespaceLink> l(new NamespaceLink());
    const int id = static_cast<int>(getpid() % 60000);
    l->ns_ = absl::StrCat("athcut", id);
    l->host_if_ = absl::StrCat("athcut", id, "h");
    const std::string ns_if = absl::StrCat("athcut", id, "n");
    const std::string net = absl::StrCat("10.252.", id % 250, ".");
    l->host_ip_ = net + "1";
    l->ns_ip_ = net + "2";
    (void)Run({"ip", "netns", "del", l->ns_});  // a leftover of a killed run
    if (absl::Status s = Run({"ip", "netns", "add", l->ns_}); !s.ok()) return s;
    l->created_ = true;
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"ip", "link", "add", l->host_if_, "type", "veth", "peer", "name", ns_if},
             {"ip", "link", "set", ns_if, "netns", l->ns_},
             {"ip", "addr", "add", l->host_ip_ + "/30", "dev", l->host_if_},
             {"ip", "link", "set", l->host_if_, "up"},
             {"ip", "-n", l->ns_, "addr", "add", l->ns_ip_ + "/30", "dev", ns_if},
             {"ip", "-n", l->ns_, "link", "set", ns_if, "up"},
             {"ip", "-n", l->ns_, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Run(cmd); !s.ok()) return s;
    }
    return l;
  }
  ~NamespaceLink() {
    if (created_) (void)Run({"ip", "netns", "del", ns_});
  }
  // The link's host end down (cut) or up again.
  absl::Status SetUp(bool up) { return Run({"ip", "link", "set", host_if_, up ? "up" : "down"}); }

  const std::string& ns() const { return ns_; }
  const std::string& host_ip() const { return host_ip_; }
  const std::string& ns_ip() const { return ns_ip_; }

 private:
  NamespaceLink() = default;
  bool created_ = false;
  std::string ns_, host_if_, host_ip_, ns_ip_;
};

// Reads the child's captured stdout up to its first newline (blocks; empty
// at EOF).
std::string FirstLine(Subprocess& p) {
  std::string line;
  char c;
  while (read(p.stdout_fd(), &c, 1) == 1 && c != '\n') line += c;
  return line;
}

TEST(LeaderCutoffTest, ACutOffLeaderGivesUpWithinItsLeaseAndItsLateWriteIsFenced) {
  if (geteuid() != 0) {
    if (std::getenv("ATHANOR_REQUIRE_NETNS") != nullptr) FAIL() << "ATHANOR_REQUIRE_NETNS is set but this is not root";
    GTEST_SKIP() << "needs root for a network namespace";
  }
  bench::ArmWatchdog(120, "leader_cutoff_test: hung\n");
  absl::StatusOr<std::unique_ptr<NamespaceLink>> link = NamespaceLink::Create();
  ASSERT_TRUE(link.ok()) << link.status();
  absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster =
      EtcdCluster::Start(3, "", std::chrono::seconds(30), (*link)->host_ip());
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  // The relay listens in the namespace on each member's port and forwards
  // to the member over the veth.
  std::vector<std::string> relay_argv = {"ip", "netns", "exec", (*link)->ns(), "/usr/bin/python3",
                                         absl::StrCat(std::getenv("ATHANOR_SOURCE_DIR"), "/tests/ha/tcp_relay.py"),
                                         (*link)->ns_ip(), (*link)->host_ip()};
  std::vector<std::string> through_link;
  for (const std::string& endpoint : (*cluster)->endpoints()) {
    const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
    relay_argv.push_back(port);
    through_link.push_back(absl::StrCat((*link)->ns_ip(), ":", port));
  }
  SubprocessOptions ro;
  ro.argv = relay_argv;
  ro.capture_stdout = true;
  ro.parent_death_signal = SIGKILL;
  absl::StatusOr<std::unique_ptr<Subprocess>> relay = Subprocess::Start(ro);
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_EQ(FirstLine(**relay), "ready");

  // The leader-to-be dials the members only through the link; the other
  // candidate dials them on loopback.
  absl::StatusOr<std::unique_ptr<EtcdClient>> via_link =
      EtcdClient::Create(EtcdUri{through_link, kPrefix}, {}, std::chrono::seconds(1));
  ASSERT_TRUE(via_link.ok()) << via_link.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> direct =
      EtcdClient::Create(EtcdUri{(*cluster)->endpoints(), kPrefix}, {}, std::chrono::seconds(1));
  ASSERT_TRUE(direct.ok()) << direct.status();

  auto options = [](std::string address, std::function<void()> on_lost) {
    LeaderElection::Options o;
    o.prefix = kPrefix;
    o.address = std::move(address);
    o.ttl = kTtl;
    o.retry = std::chrono::milliseconds(50);
    o.on_lost = std::move(on_lost);
    return o;
  };
  absl::Notification a_lost;
  absl::StatusOr<std::unique_ptr<LeaderElection>> a =
      LeaderElection::Campaign(via_link->get(), options("10.0.0.1:7700", [&] { a_lost.Notify(); }), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  std::atomic<int> a_fenced{0};
  EtcdStore a_store(via_link->get(), EtcdStore::Options{.prefix = kPrefix,
                                                        .fence = (*a)->Fence(),
                                                        .max_txn_ops = 128,
                                                        .on_fenced = [&] { a_fenced.fetch_add(1); }});
  Changes before;
  JobRecord job;
  job.seq = 1;
  job.id = "job-1";
  job.spec.name = "before-the-cut";
  before.jobs = {job};
  ASSERT_TRUE(a_store.Commit(before).ok());

  // The other candidate waits for the lead.
  absl::StatusOr<std::unique_ptr<LeaderElection>> b = absl::UnknownError("not elected");
  absl::Notification b_done;
  Clock::time_point b_elected;
  std::thread b_thread([&] {
    b = LeaderElection::Campaign(direct->get(), options("10.0.0.2:7700", [] {}), nullptr);
    b_elected = Clock::now();
    b_done.Notify();
  });

  const Clock::time_point cut = Clock::now();
  ASSERT_TRUE((*link)->SetUp(false).ok());
  ASSERT_TRUE(a_lost.WaitForNotificationWithTimeout(absl::FromChrono(kTtl)))
      << "the cut-off leader did not give up within its lease's ttl";
  const Clock::duration gave_up = Clock::now() - cut;
  EXPECT_LE(gave_up, kTtl);
  // The lease runs out on etcd's side at most a ttl after the last renewal;
  // the waiting candidate then creates the key.
  ASSERT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  b_thread.join();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT((*b)->term(), (*a)->term());
  // Never two leaders: the old one had given up before the new one led.
  EXPECT_LT(cut + gave_up, b_elected);
  std::printf("cut-off leader gave up after %.2f s; the new leader (term %lld) was elected %.2f s after the cut\n",
              std::chrono::duration<double>(gave_up).count(), static_cast<long long>((*b)->term()),
              std::chrono::duration<double>(b_elected - cut).count());

  // The link back: the old leader's late write reaches etcd and is refused
  // by its fence. Until its connections recover, its tries fail Unavailable
  // (the committer would retry them the same way).
  ASSERT_TRUE((*link)->SetUp(true).ok());
  Changes late;
  JobRecord stale = job;
  stale.spec.name = "after-the-cut";
  late.jobs = {stale};
  JobRecord extra;
  extra.seq = 2;
  extra.id = "job-2";
  late.jobs.push_back(extra);
  absl::Status s = absl::UnavailableError("not tried");
  for (int i = 0; i < 30 && absl::IsUnavailable(s); ++i) s = a_store.Commit(late);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), absl::StrCat("fenced: ", kPrefix, "/leader was created at revision ", (*b)->term(),
                                      " by 10.0.0.2:7700 (this coordinator's term: ", (*a)->term(),
                                      "); nothing written"));
  EXPECT_EQ(a_fenced.load(), 1);

  // etcd holds what the old leader wrote before the cut, and nothing after.
  absl::StatusOr<RangeResult> jobs = (*direct)->Range(absl::StrCat(kPrefix, "/jobs/"),
                                                      PrefixEnd(absl::StrCat(kPrefix, "/jobs/")));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->kvs.size(), 1u);
  EXPECT_EQ(jobs->kvs[0].key, absl::StrCat(kPrefix, "/jobs/00000000000000000001"));
  EXPECT_NE(jobs->kvs[0].value.find("before-the-cut"), std::string::npos) << jobs->kvs[0].value;

  b->reset();
  a->reset();
  (void)(*relay)->Signal(SIGKILL);
  (*relay)->Wait();
  bench::DisarmWatchdog();
}

}  // namespace
}  // namespace athanor::coord::etcd
