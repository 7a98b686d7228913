// The node checkpoint service's findings of an outside attack, each against
// the real athanor-checkpoint-service binary (root, as the agent runs it)
// and ranks of other uids (forked children that setresuid, as sandboxed
// ranks run), speaking the wire (wire.h) or through ServiceCheckpointer:
//
//  (b) a rank shrinks its staging area before its hand-off: the area is a
//      sealed memfd, the shrink fails with EPERM, and the service lives on
//      to upload another job's shard;
//  (a) a rank names a root-only folder, or a symlink into one, as its file://
//      root: nothing is written there; its own root gets files it owns;
//  (c) a rank holds the node's staging budget and never hands off: a uid gets
//      no more than its share, the idle area is reclaimed, another rank's
//      checkpoint is accepted, and the hog's late hand-off gets a clear
//      refusal; a uid past its connection cap gets a refusal, not silence;
//  (d) on a fresh node, a rank of another tenant stages a job's id before
//      the job's own ranks: refused, since only the ranks the agent
//      registered (rank_registry.h) may stage, as the uid they run as; the
//      job then checkpoints normally.
//
// The test stands in for the agent: it registers each rank in the service's
// --registry-dir before that rank stages, as the agent does before it
// starts a rank.
//
// Needs root (CI runs as root); skipped otherwise. Each test runs under the
// cluster harness's 100 s watchdog, and every forked rank under its own alarm.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest.h"
#include "checkpoint/service/rank_registry.h"
#include "checkpoint/service/service_checkpointer.h"
#include "checkpoint/service/wire.h"
#include "checkpoint/shard_upload.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

using testing_util::FillRankState;
using testing_util::RankState;

constexpr uid_t kTenant = 62001;       // the attacker's uid
constexpr uid_t kOtherTenant = 62002;  // a second tenant
constexpr uid_t kThirdTenant = 62003;
constexpr int kRankWatchdogSeconds = 60;

// Runs `fn` in a forked child as `uid` (gid the same number, no groups) and
// returns its exit code; the child dies of SIGALRM (128+14) past the watchdog.
int RunAs(uid_t uid, const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(kRankWatchdogSeconds);
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) {
      _exit(100);
    }
    _exit(fn());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A child's report: `got` unless it equals `want` (then 0), on stderr.
int Expect(const std::string& got, const std::string& want) {
  if (got == want) return 0;
  fprintf(stderr, "got '%s'\nwant '%s'\n", got.c_str(), want.c_str());
  return 1;
}

// Copies the shard FillRankState makes for step 1 into the area `fd`.
bool CopyShard(int fd, int rank, int world) {
  RankState s;
  FillRankState(&s, 1, rank, world);
  absl::StatusOr<SafetensorsLayout> layout = PlanShard(s.state, 1, rank, world);
  if (fd < 0 || !layout.ok()) return false;
  void* map = mmap(nullptr, layout->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return false;
  char* base = static_cast<char*>(map);
  std::memcpy(base, layout->header.data(), layout->header.size());
  for (size_t i = 0; i < s.state.tensors.size(); ++i) {
    std::memcpy(base + layout->data_start + layout->entries[i].begin, s.state.tensors[i].data,
                s.state.tensors[i].bytes);
  }
  munmap(map, layout->total_size);
  return true;
}

// A rank speaking the wire by hand.
class RawRank {
 public:
  explicit RawRank(const std::string& socket) {
    absl::StatusOr<int> s = ckptsvc::ConnectService(socket);
    sock_ = s.ok() ? *s : -1;
  }
  ~RawRank() {
    if (sock_ >= 0) close(sock_);
  }
  // The reply; its fd (if any) into *fd.
  nlohmann::json Ask(const nlohmann::json& msg, int* fd = nullptr) {
    if (!ckptsvc::SendFrame(sock_, msg).ok()) return {{"sent", false}};
    absl::StatusOr<ckptsvc::Frame> reply = ckptsvc::RecvFrame(sock_);
    if (!reply.ok()) return {{"received", reply.status().ToString()}};
    if (fd != nullptr) {
      *fd = reply->fd;
    } else if (reply->fd >= 0) {
      close(reply->fd);
    }
    return reply->msg;
  }
  nlohmann::json Stage(const std::string& job, int rank, int world, uint64_t bytes,
                       const std::string& uri, bool wait, int* fd = nullptr) {
    return Ask({{"op", "stage"}, {"job", job}, {"attempt", 1}, {"rank", rank},
                {"world_size", world}, {"step", 1}, {"bytes", bytes}, {"wait", wait},
                {"uri", uri}, {"keep_last", 3}},
               fd);
  }
  // Hands off the shard FillRankState makes for step 1.
  nlohmann::json Handoff(const std::string& job, int rank, int world) {
    RankState s;
    FillRankState(&s, 1, rank, world);
    absl::StatusOr<SafetensorsLayout> layout = PlanShard(s.state, 1, rank, world);
    std::vector<ShardSpec> specs;
    for (const TensorRef& t : s.state.tensors) specs.push_back(t.shard);
    RankManifest m = PlanManifest(job, 1, rank, world, *layout, specs);
    return Ask({{"op", "handoff"}, {"manifest", EncodeManifest(m)}});
  }

 private:
  int sock_ = -1;
};

class CkptServiceFindingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the service serves ranks of other uids";
    LocalCluster::RearmWatchdog();
    std::string tmpl = ::testing::TempDir() + "/ckptsvc-findings-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // ranks of other uids reach the socket
  }
  void TearDown() override {
    if (service_ != nullptr) {
      EXPECT_TRUE(service_->Signal(SIGTERM).ok());
      service_->Wait();
    }
  }

  void StartService(const std::vector<std::string>& flags = {}) {
    SubprocessOptions o;
    o.argv = {std::string(getenv("ATHANOR_BIN_DIR")) + "/athanor-checkpoint-service", "--socket",
              socket(), "--staging-dir", dir_ + "/staging", "--stats-file", dir_ + "/stats.json",
              "--registry-dir", registry_dir()};
    o.argv.insert(o.argv.end(), flags.begin(), flags.end());
    o.stderr_path = dir_ + "/service.log";
    o.stdout_path = dir_ + "/service.log";
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok()) << p.status();
    service_ = std::move(*p);
    ASSERT_TRUE(LocalCluster::WaitFor([&] {
      if (service_->Poll().has_value()) return true;  // died: reported below
      absl::StatusOr<int> s = ckptsvc::ConnectService(socket());
      if (s.ok()) close(*s);
      return s.ok();
    })) << Log();
    ASSERT_FALSE(service_->Poll().has_value()) << Log();
  }
  std::string socket() const { return dir_ + "/svc.sock"; }
  std::string registry_dir() const { return dir_ + "/registry"; }
  // What the agent does before it starts rank `rank` (attempt 1) of `job`.
  void Register(const std::string& job, int rank, uid_t uid, const std::string& uri) {
    if (registry_ == nullptr) {
      auto opened = ckptsvc::RankRegistry::Open(registry_dir());
      ASSERT_TRUE(opened.ok()) << opened.status();
      registry_ = std::move(*opened);
    }
    ASSERT_TRUE(registry_->Register({job, 1, rank, uid, uri, 0}).ok());
  }
  std::string Log() const { return ReadFile(dir_ + "/service.log"); }
  // The service's upload totals: {uploaded, failed}; {-1, -1} before the first.
  std::pair<int64_t, int64_t> Totals() const {
    nlohmann::json j = nlohmann::json::parse(ReadFile(dir_ + "/stats.json"), nullptr, false);
    if (!j.is_object()) return {-1, -1};
    return {j.value("uploaded", int64_t{-1}), j.value("failed", int64_t{-1})};
  }
  // Waits until `n` uploads have ended (or the service died).
  bool WaitForUploads(int64_t n) {
    return LocalCluster::WaitFor(
        [&] {
          auto [ok, failed] = Totals();
          return ok + failed >= n || service_->Poll().has_value();
        },
        std::chrono::seconds(30));
  }
  // A rank of `job` saving step 1 through the service: 0 when handed off.
  int SaveThroughService(const std::string& job, const std::string& uri) {
    ServiceCheckpointerOptions o;
    o.socket_path = socket();
    o.job = job;
    o.attempt = 1;
    o.uri = uri;
    auto client = ServiceCheckpointer::Connect(o);
    if (!client.ok()) return Expect(client.status().ToString(), "connected");
    RankState s;
    FillRankState(&s, 1, 0, 1);
    absl::StatusOr<bool> saved = (*client)->Save(1, s.state);
    if (!saved.ok()) return Expect(saved.status().ToString(), "saved");
    if (!*saved) return Expect("skipped", "saved");
    absl::Status handed = (*client)->Wait();
    return Expect(handed.ToString(), "OK");
  }
  static bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
      while (struct dirent* e = readdir(d)) {
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
      }
      closedir(d);
    }
    return names;
  }

  std::string dir_;
  std::unique_ptr<Subprocess> service_;
  std::unique_ptr<ckptsvc::RankRegistry> registry_;
  std::string expected_b_;  // (d): what tenant B's stage is answered
};

// (b) An area shrunk before its hand-off cannot fault the service.
TEST_F(CkptServiceFindingsTest, AShrunkAreaCannotKillTheServiceAndOtherUploadsComplete) {
  StartService();
  Register("attacker", 0, geteuid(), "file://" + dir_ + "/attacker");
  Register("victim", 0, geteuid(), "file://" + dir_ + "/victim");
  RankState s;
  FillRankState(&s, 1, 0, 1);
  absl::StatusOr<SafetensorsLayout> layout = PlanShard(s.state, 1, 0, 1);
  ASSERT_TRUE(layout.ok());
  RawRank attacker(socket());
  int fd = -1;
  nlohmann::json granted =
      attacker.Stage("attacker", 0, 1, layout->total_size, "file://" + dir_ + "/attacker", true, &fd);
  ASSERT_EQ(granted.value("ok", false), true) << granted.dump();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(CopyShard(fd, 0, 1));  // the shard, copied in as a rank would
  const int truncated = ftruncate(fd, 0);
  const int truncate_errno = errno;
  close(fd);
  EXPECT_EQ(attacker.Handoff("attacker", 0, 1).dump(), R"({"ok":true})");
  // Another job's rank, after: its upload completes on the same service.
  EXPECT_EQ(SaveThroughService("victim", "file://" + dir_ + "/victim"), 0) << Log();
  ASSERT_TRUE(WaitForUploads(2)) << Log();
  const std::optional<ExitInfo> died = service_->Poll();
  ASSERT_FALSE(died.has_value()) << "the service died (" << died->ToString() << "): " << Log();
  EXPECT_EQ(truncated, -1);
  EXPECT_EQ(truncate_errno, EPERM);  // sealed: F_SEAL_SHRINK
  EXPECT_EQ(Totals(), std::make_pair(int64_t{2}, int64_t{0})) << Log();
  EXPECT_TRUE(Exists(dir_ + "/victim/" + ckpt_layout::ManifestKey("victim", 1, 0)));
  EXPECT_TRUE(Exists(dir_ + "/attacker/" + ckpt_layout::ManifestKey("attacker", 1, 0)));
}

// (a) A file:// root is written as the rank's uid: a root-only folder, or a
// symlink planted into one, gets nothing.
TEST_F(CkptServiceFindingsTest, FileRootsAreWrittenAsTheRanksUid) {
  StartService();
  const std::string root_only = dir_ + "/root-only";
  const std::string tenant = dir_ + "/tenant";
  ASSERT_EQ(mkdir(root_only.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(tenant.c_str(), 0755), 0);
  ASSERT_EQ(chown(tenant.c_str(), kTenant, kTenant), 0);
  ASSERT_EQ(symlink(root_only.c_str(), (tenant + "/link").c_str()), 0);
  ASSERT_EQ(lchown((tenant + "/link").c_str(), kTenant, kTenant), 0);
  Register("named-root-only", 0, kTenant, "file://" + root_only + "/store");
  Register("through-link", 0, kTenant, "file://" + tenant + "/link/store");
  Register("own", 0, kTenant, "file://" + tenant + "/own");
  // The service takes each hand-off (it owns the bytes) and fails the
  // uploads it may not make; the rank's own root works.
  EXPECT_EQ(RunAs(kTenant, [&] {
              return SaveThroughService("named-root-only", "file://" + root_only + "/store") +
                     SaveThroughService("through-link", "file://" + tenant + "/link/store") +
                     SaveThroughService("own", "file://" + tenant + "/own");
            }),
            0);
  ASSERT_TRUE(WaitForUploads(3)) << Log();
  EXPECT_EQ(Entries(root_only), std::vector<std::string>{}) << Log();
  EXPECT_EQ(Totals(), std::make_pair(int64_t{1}, int64_t{2})) << Log();
  struct stat st = {};
  ASSERT_EQ(stat((tenant + "/own/" + ckpt_layout::ManifestKey("own", 1, 0)).c_str(), &st), 0) << Log();
  EXPECT_EQ(st.st_uid, kTenant);
  EXPECT_NE(Log().find("upload of through-link/step-0000000001/"), std::string::npos) << Log();
}

// (c) A uid holds what the node can spare and never hands off: it got no
// more than its share, its idle area is reclaimed once another rank waits,
// that rank's checkpoint goes through, and the hog's late hand-off is refused.
TEST_F(CkptServiceFindingsTest, ABudgetHogIsCappedAndReclaimedAndOthersStillCheckpoint) {
  StartService({"--budget-mb", "3", "--budget-per-uid-mb", "2", "--handoff-timeout-s", "1",
                "--stage-wait-timeout-s", "30"});
  const std::string uri = "file://" + dir_ + "/hog";
  Register("hog", 0, kTenant, uri);
  Register("hog", 1, kTenant, uri);
  Register("victim", 0, geteuid(), "file://" + dir_ + "/victim");
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  // The hog stages, tells the test, waits for its word, then hands off late.
  int hog_code = -1;
  std::thread hog([&] {
    hog_code = RunAs(kTenant, [&] {
      RawRank rank(socket());
      int rc = Expect(rank.Stage("hog", 0, 2, 3 << 20, uri, true).value("error", ""),
                      absl::StrCat("RESOURCE_EXHAUSTED: a 3145728-byte shard can never fit uid ",
                                   kTenant, "'s 2097152-byte share of the node's staging budget"));
      const nlohmann::json granted = rank.Stage("hog", 0, 2, 2 << 20, uri, true);
      rc += Expect(absl::StrCat(granted.value("ok", false), " ", granted.value("capacity", 0)),
                   "1 2097152");
      RawRank second(socket());
      rc += Expect(second.Stage("hog", 1, 2, 1, uri, false).value("reason", ""),
                   absl::StrCat("uid ", kTenant, "'s share of the node's staging budget (2097152 "
                                "bytes, 2097152 in use) cannot take 1 more"));
      char c = 'r';
      if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) return 50;
      rc += Expect(rank.Handoff("hog", 0, 2).value("error", ""),
                   "FAILED_PRECONDITION: the hand-off of step 1 is refused: its staging area was "
                   "reclaimed: not handed off within 1s while other ranks waited for the node's "
                   "staging budget");
      return rc;
    });
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  // 1 MiB is free; this rank asks for 2 and waits until the hog's area is reclaimed.
  RawRank victim(socket());
  int fd = -1;
  const nlohmann::json granted =
      victim.Stage("victim", 0, 1, 2 << 20, "file://" + dir_ + "/victim", true, &fd);
  EXPECT_EQ(absl::StrCat(granted.value("ok", false), " ", granted.value("capacity", 0)), "1 2097152")
      << granted.dump();
  ASSERT_TRUE(CopyShard(fd, 0, 1));
  close(fd);
  EXPECT_EQ(victim.Handoff("victim", 0, 1).dump(), R"({"ok":true})");
  ASSERT_EQ(write(go[1], "g", 1), 1);
  hog.join();
  EXPECT_EQ(hog_code, 0) << Log();
  ASSERT_TRUE(WaitForUploads(1)) << Log();
  EXPECT_EQ(Totals(), std::make_pair(int64_t{1}, int64_t{0})) << Log();
  EXPECT_TRUE(Exists(dir_ + "/victim/" + ckpt_layout::ManifestKey("victim", 1, 0)));
  for (int p : {ready[0], ready[1], go[0], go[1]}) close(p);
}

// (c) A uid past its connection cap is told so and closed; others connect.
TEST_F(CkptServiceFindingsTest, ConnectionsPastAUidsCapAreRefusedWithAReply) {
  StartService({"--max-connections-per-uid", "2"});
  Register("other", 0, geteuid(), "file://" + dir_ + "/other");
  EXPECT_EQ(RunAs(kTenant,
                  [&] {
                    RawRank first(socket()), second(socket());
                    absl::StatusOr<int> third = ckptsvc::ConnectService(socket());
                    if (!third.ok()) return Expect(third.status().ToString(), "connected");
                    const struct timeval bound = {20, 0};  // the old service never answers
                    setsockopt(*third, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
                    absl::StatusOr<ckptsvc::Frame> refused = ckptsvc::RecvFrame(*third);
                    close(*third);
                    return Expect(refused.ok() ? refused->msg.dump() : refused.status().ToString(),
                                  nlohmann::json{{"ok", false},
                                                 {"error", absl::StrCat(
                                                      "RESOURCE_EXHAUSTED: uid ", kTenant,
                                                      " already has 2 connections to the checkpoint "
                                                      "service (the most one uid may have)")}}
                                      .dump());
                  }),
            0)
      << Log();
  EXPECT_EQ(SaveThroughService("other", "file://" + dir_ + "/other"), 0) << Log();
}

// (d) On a fresh node, tenant B's rank stages tenant A's job id before A's
// ranks have started: refused, and still refused once the agent registered
// A's rank (as A's uid); A's rank then checkpoints normally.
TEST_F(CkptServiceFindingsTest, AnotherTenantStagingAJobFirstIsRefusedAndTheJobCheckpoints) {
  StartService();
  const std::string store = dir_ + "/store";
  ASSERT_EQ(mkdir(store.c_str(), 0755), 0);
  ASSERT_EQ(chown(store.c_str(), kTenant, kTenant), 0);
  const std::string uri = "file://" + store;
  auto stage_as_b = [&](int rank, int world) {
    return RunAs(kOtherTenant, [&] {
      RawRank b(socket());
      const nlohmann::json reply = b.Stage("victim", rank, world, 4096, uri, true);
      if (reply.contains("sent")) return 40;
      return Expect(reply.value("error", reply.dump()), expected_b_);
    });
  };
  expected_b_ = "PERMISSION_DENIED: job victim attempt 1 rank 0 is not registered with this node's checkpoint "
                "service: only ranks this node's agent started may stage, and only as themselves";
  EXPECT_EQ(stage_as_b(0, 1), 0) << Log();
  // The agent starts A's rank: registered with A's uid and A's root.
  Register("victim", 0, kTenant, uri);
  expected_b_ = absl::StrCat("PERMISSION_DENIED: job victim attempt 1 rank 0 runs as uid ", kTenant,
                             " on this node; uid ", kOtherTenant, " may not stage for it");
  EXPECT_EQ(stage_as_b(0, 1), 0) << Log();
  EXPECT_EQ(RunAs(kTenant, [&] { return SaveThroughService("victim", uri); }), 0) << Log();
  ASSERT_TRUE(WaitForUploads(1)) << Log();
  EXPECT_EQ(Totals(), std::make_pair(int64_t{1}, int64_t{0})) << Log();
  struct stat st = {};
  ASSERT_EQ(stat((store + "/" + ckpt_layout::ManifestKey("victim", 1, 0)).c_str(), &st), 0) << Log();
  EXPECT_EQ(st.st_uid, kTenant);
  EXPECT_NE(Log().find(absl::StrCat("refusing a stage from uid ", kOtherTenant)), std::string::npos) << Log();
}

}  // namespace
}  // namespace athanor::testing
