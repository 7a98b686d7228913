// EtcdStore against a real etcd (Debian's, one member on loopback): every
// kind of record reads back as SqliteStore gives it for the same commits,
// snapshots replace and deletions remove, the fence refuses a deposed
// leader's batch whole, LoadAll pages, and a batch over the cap never leaves.
#include "coordinator/store/etcd/etcd_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/store/group_commit.h"
#include "coordinator/store/record_codec.h"
#include "coordinator/store/sqlite/sqlite_store.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor::coord::etcd {
namespace {

const int kWatchdog = (alarm(100), 0);

using testing_etcd::EtcdCluster;

// Every record of `c` as its row, in the order LoadAll gave them.
std::vector<std::string> Rows(const Store::Contents& c) {
  std::vector<std::string> out;
  for (const JobRecord& j : c.jobs) out.push_back("job " + EncodeJob(j));
  for (const NodeRecord& n : c.nodes) out.push_back("node " + EncodeNode(n));
  for (const auto& [tenant, gpus] : c.quotas) out.push_back(absl::StrCat("quota ", tenant, "=", gpus));
  for (const auto& p : c.prices) out.push_back("price " + EncodeBillingRow(p));
  for (const auto& p : c.plans) out.push_back("plan " + EncodeBillingRow(p));
  for (const auto& e : c.ledger) out.push_back("ledger " + EncodeBillingRow(e));
  for (const auto& i : c.images) out.push_back("image " + EncodeBillingRow(i));
  for (const auto& v : c.volumes) out.push_back("volume " + EncodeBillingRow(v));
  for (const auto& s : c.snapshots) out.push_back("snapshot " + EncodeBillingRow(s));
  return out;
}

JobRecord Job(int64_t seq, const std::string& name) {
  JobRecord j;
  j.seq = seq;
  j.id = std::to_string(seq);
  j.spec.name = name;
  j.spec.tenant = "acme";
  j.spec.command = {"python3", "train.py"};
  j.state = JobState::kRunning;
  j.attempt_nodes = {{"n1", "n2"}};
  return j;
}

rpc::Image Image(const std::string& tenant, const std::string& name) {
  rpc::Image i;
  i.set_tenant(tenant);
  i.set_name(name);
  i.set_digest("sha256:" + std::string(64, 'a'));
  i.set_size_bytes(4096);
  return i;
}

rpc::Volume Volume(const std::string& tenant, const std::string& name) {
  rpc::Volume v;
  v.set_tenant(tenant);
  v.set_name(name);
  v.set_size_limit_bytes(1 << 30);
  v.add_used_by("7");  // a view: never stored
  return v;
}

rpc::InstanceSnapshot Snapshot(const std::string& id) {
  rpc::InstanceSnapshot s;
  s.set_id(id);
  s.set_tenant("acme");
  s.set_job_id("7");
  return s;
}

billing::LedgerEntry Entry(int64_t id, int64_t amount) {
  billing::LedgerEntry e;
  e.set_id(id);
  e.set_tenant("acme");
  e.set_kind(billing::ACCRUAL);
  e.set_amount_micros(amount);
  return e;
}

// Every kind of record, out of order and with keys whose bytes sort
// otherwise than their fields ("a-b" < "a/" but "a" < "a-b"; seq 10 < 9 as text).
Changes EveryKind() {
  Changes c;
  c.jobs = {Job(10, "ten"), Job(9, "nine"), Job(1, "one")};
  NodeRecord b, a;
  b.name = "node-b";
  b.host = "10.0.0.2";
  b.state = NodeState::kDown;
  a.name = "node-a";
  a.agent_address = "10.0.0.1:7070";
  a.drain = true;
  c.nodes = {b, a};
  c.quotas = {{"acme", 8}, {"gone", -1}, {"a/b", 2}};
  for (auto [model, effective, micros] : {std::tuple{"H200-x", 0, 1}, std::tuple{"H200", 2000, 3},
                                          std::tuple{"H200", 1000, 2}, std::tuple{"*", 0, 4}}) {
    billing::Price p;
    p.set_gpu_model(model);
    p.set_effective_unix_ms(effective);
    p.set_gpu_hour_micros(micros);
    c.prices.push_back(p);
  }
  for (const char* tenant : {"zeta", "acme"}) {
    billing::Plan p;
    p.set_tenant(tenant);
    p.set_credit_limit_micros(5);
    c.plans.push_back(p);
  }
  c.ledger = {Entry(3, -30), Entry(1, 100), Entry(2, -20)};
  c.images = {{Image("a-b", "base"), false}, {Image("a", "base"), false}, {Image("a", "z"), false}};
  c.volumes = {{Volume("a-b", "data"), false}, {Volume("a", "data"), false}};
  c.snapshots = {{Snapshot("snap-9-1"), false}, {Snapshot("snap-10-1"), false}};
  return c;
}

class EtcdStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(1);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    absl::StatusOr<EtcdUri> uri = ParseEtcdUri(cluster_->uri());
    ASSERT_TRUE(uri.ok()) << uri.status();
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(*uri);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete cluster_;
  }

  // A store under a prefix of this test's own, fenced by a leader key made
  // for it; `fenced_` counts on_fenced calls.
  std::unique_ptr<EtcdStore> MakeStore(int max_txn_ops = 128, int64_t page = 1000) {
    prefix_ = absl::StrCat("/", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    absl::StatusOr<int64_t> term = client_->Put(prefix_ + "/leader", "127.0.0.1:7000");
    EXPECT_TRUE(term.ok()) << term.status();
    fence_.key = prefix_ + "/leader";
    fence_.target = Compare::Target::kCreateRevision;
    fence_.number = term.value_or(0);
    EtcdStore::Options options;
    options.prefix = prefix_;
    options.fence = fence_;
    options.max_txn_ops = max_txn_ops;
    options.page = page;
    options.on_fenced = [this] { ++fenced_; };
    return std::make_unique<EtcdStore>(client_, options);
  }

  // The keys under the prefix, in etcd's order.
  std::vector<std::string> Keys() {
    absl::StatusOr<RangeResult> r = client_->Range(prefix_ + "/", PrefixEnd(prefix_ + "/"));
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::string> out;
    if (r.ok()) {
      for (const KeyValue& kv : r->kvs) out.push_back(kv.key.substr(prefix_.size()));
    }
    return out;
  }

  static EtcdCluster* cluster_;
  static EtcdClient* client_;
  std::string prefix_;
  Compare fence_;
  int fenced_ = 0;
};

EtcdCluster* EtcdStoreTest::cluster_ = nullptr;
EtcdClient* EtcdStoreTest::client_ = nullptr;

std::unique_ptr<SqliteStore> TempSqlite() {
  char dir[] = "/tmp/etcd_store_test.XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  absl::StatusOr<std::unique_ptr<SqliteStore>> s = SqliteStore::Open(std::string(dir) + "/state.db");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST_F(EtcdStoreTest, EveryKindReadsBackAsSqliteGivesIt) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  std::unique_ptr<SqliteStore> sqlite = TempSqlite();
  ASSERT_NE(sqlite, nullptr);
  const Changes c = EveryKind();
  ASSERT_TRUE(store->Commit(c).ok());
  ASSERT_TRUE(sqlite->Commit(c).ok());
  absl::StatusOr<Store::Contents> got = store->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<Store::Contents> want = sqlite->LoadAll();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(Rows(*got), Rows(*want));
  // And in the order Store::Contents promises.
  ASSERT_EQ(got->jobs.size(), 3u);
  EXPECT_EQ(got->jobs[0].seq, 1);
  EXPECT_EQ(got->jobs[2].seq, 10);
  EXPECT_EQ(got->nodes[0].name, "node-a");
  EXPECT_EQ(got->quotas, (std::map<std::string, int32_t>{{"a/b", 2}, {"acme", 8}, {"gone", -1}}));
  ASSERT_EQ(got->prices.size(), 4u);
  EXPECT_EQ(got->prices[0].gpu_model(), "*");
  EXPECT_EQ(got->prices[1].effective_unix_ms(), 1000);
  EXPECT_EQ(got->prices[3].gpu_model(), "H200-x");
  ASSERT_EQ(got->ledger.size(), 3u);
  EXPECT_EQ(got->ledger[0].amount_micros(), 100);
  ASSERT_EQ(got->images.size(), 3u);
  EXPECT_EQ(got->images[0].tenant() + "/" + got->images[1].name() + "/" + got->images[2].tenant(), "a/z/a-b");
  ASSERT_EQ(got->volumes.size(), 2u);
  EXPECT_EQ(got->volumes[0].used_by_size(), 0);
  EXPECT_EQ(got->snapshots[0].id(), "snap-10-1");
  // One key per record, laid out as etcd_store.h says (names escaped).
  EXPECT_EQ(Keys(), (std::vector<std::string>{
                        "/images/a-b/base",
                        "/images/a/base",
                        "/images/a/z",
                        "/jobs/00000000000000000001",
                        "/jobs/00000000000000000009",
                        "/jobs/00000000000000000010",
                        "/leader",
                        "/ledger/00000000000000000001",
                        "/ledger/00000000000000000002",
                        "/ledger/00000000000000000003",
                        "/nodes/node-a",
                        "/nodes/node-b",
                        "/plans/acme",
                        "/plans/zeta",
                        "/prices/*/00000000000000000000",
                        "/prices/H200-x/00000000000000000000",
                        "/prices/H200/00000000000000001000",
                        "/prices/H200/00000000000000002000",
                        "/quotas/a%2Fb",
                        "/quotas/acme",
                        "/quotas/gone",
                        "/snapshots/snap-10-1",
                        "/snapshots/snap-9-1",
                        "/volumes/a-b/data",
                        "/volumes/a/data",
                    }));
}

TEST_F(EtcdStoreTest, LaterSnapshotsReplaceAndDeletionsRemove) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  std::unique_ptr<SqliteStore> sqlite = TempSqlite();
  ASSERT_NE(sqlite, nullptr);
  Changes first;
  first.jobs = {Job(1, "v1"), Job(2, "keep")};
  first.quotas = {{"acme", 3}, {"beta", 1}};
  first.images = {{Image("acme", "old"), false}, {Image("acme", "kept"), false}};
  first.volumes = {{Volume("acme", "scratch"), false}};
  first.snapshots = {{Snapshot("snap-1-1"), false}, {Snapshot("snap-1-2"), false}};
  Changes second;
  second.jobs = {Job(1, "v2"), Job(1, "v3")};  // the later of one batch wins too
  second.quotas = {{"acme", -1}};              // removed: kept as -1, as SQLite keeps it
  second.images = {{Image("acme", "old"), true},
                   {Image("acme", "new"), false},
                   {Image("acme", "new"), true},  // written, then removed, in one batch
                   {Image("acme", "back"), true},
                   {Image("acme", "back"), false}};  // removed, then written
  second.volumes = {{Volume("acme", "scratch"), true}, {Volume("acme", "never"), true}};
  second.snapshots = {{Snapshot("snap-1-1"), true}};
  for (Store* s : std::vector<Store*>{store.get(), sqlite.get()}) {
    ASSERT_TRUE(s->Commit(first).ok());
    ASSERT_TRUE(s->Commit(second).ok());
  }
  absl::StatusOr<Store::Contents> got = store->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Rows(*got), Rows(sqlite->LoadAll().value()));
  ASSERT_EQ(got->jobs.size(), 2u);
  EXPECT_EQ(got->jobs[0].spec.name, "v3");
  EXPECT_EQ(got->quotas, (std::map<std::string, int32_t>{{"acme", -1}, {"beta", 1}}));
  ASSERT_EQ(got->images.size(), 2u);
  EXPECT_EQ(got->images[0].name(), "back");
  EXPECT_EQ(got->images[1].name(), "kept");
  EXPECT_TRUE(got->volumes.empty());
  ASSERT_EQ(got->snapshots.size(), 1u);
  EXPECT_EQ(got->snapshots[0].id(), "snap-1-2");
}

TEST_F(EtcdStoreTest, ADeposedLeaderWritesNothing) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  Changes before;
  before.jobs = {Job(1, "before")};
  ASSERT_TRUE(store->Commit(before).ok());
  // Another leader's term: the key gone and made again (a new create_revision).
  ASSERT_TRUE(client_->Txn({}, {Op::Delete(fence_.key)}).ok());
  absl::StatusOr<int64_t> next = client_->Put(fence_.key, "127.0.0.1:7001");
  ASSERT_TRUE(next.ok()) << next.status();
  Changes c = EveryKind();
  absl::Status s = store->Commit(c);
  EXPECT_EQ(s.ToString(),
            absl::StrCat("FAILED_PRECONDITION: fenced: ", fence_.key, " was created at revision ", *next,
                         " by 127.0.0.1:7001 (this coordinator's term: ", fence_.number, "); nothing written"));
  EXPECT_EQ(fenced_, 1);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"/jobs/00000000000000000001", "/leader"}));
  // No leader at all: refused the same way.
  ASSERT_TRUE(client_->Txn({}, {Op::Delete(fence_.key)}).ok());
  s = store->Commit(before);
  EXPECT_EQ(s.ToString(), absl::StrCat("FAILED_PRECONDITION: fenced: ", fence_.key, " is gone (this coordinator's term: ",
                                       fence_.number, "); nothing written"));
  EXPECT_EQ(fenced_, 2);
}

TEST_F(EtcdStoreTest, LoadAllPagesInSeqOrder) {
  std::unique_ptr<EtcdStore> store = MakeStore(128, /*page=*/2);
  Changes c;
  c.jobs = {Job(11, "e"), Job(2, "b"), Job(10, "d"), Job(1, "a"), Job(9, "c")};
  ASSERT_TRUE(store->Commit(c).ok());
  absl::StatusOr<Store::Contents> got = store->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<int64_t> seqs;
  std::string names;
  for (const JobRecord& j : got->jobs) {
    seqs.push_back(j.seq);
    names += j.spec.name;
  }
  EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 9, 10, 11}));
  EXPECT_EQ(names, "abcde");
}

TEST_F(EtcdStoreTest, ABatchOverTheCapIsRefusedBeforeItIsSent) {
  std::unique_ptr<EtcdStore> store = MakeStore(/*max_txn_ops=*/4);
  EXPECT_EQ(store->max_batch_records(), 3);
  Changes c;
  c.jobs = {Job(1, "a"), Job(2, "b")};
  c.ledger = {Entry(1, 5), Entry(2, 6)};
  EXPECT_EQ(store->Commit(c).ToString(),
            "INVALID_ARGUMENT: etcd store: a batch of 4 records, over the 3 one transaction takes "
            "(--max-txn-ops 4 less the fence)");
  EXPECT_EQ(Keys(), std::vector<std::string>{"/leader"});
  c.ledger.pop_back();
  EXPECT_TRUE(store->Commit(c).ok());
  EXPECT_EQ(Keys().size(), 4u);
}

// The group committer capped at the store's max_batch_records(): batches
// queued faster than etcd writes merge into rounds the store takes, never
// into one it refuses.
TEST_F(EtcdStoreTest, TheCommitterKeepsRoundsWithinTheStoresCap) {
  std::unique_ptr<EtcdStore> store = MakeStore(/*max_txn_ops=*/8);
  EXPECT_EQ(store->max_commit_records(), 7u);
  constexpr int kBatches = 30;
  std::vector<absl::Status> results(kBatches, absl::UnknownError("not answered"));
  GroupCommitter::Stats stats;
  {
    GroupCommitter committer(std::move(store), [](const std::set<std::string>&, uint64_t) {}, nullptr);
    absl::Notification all_done;
    int answered = 0;
    for (int i = 0; i < kBatches; ++i) {
      Changes c;
      for (int j = 0; j < 3; ++j) c.jobs.push_back(Job(i * 3 + j + 1, "c"));
      committer.Commit(std::move(c), {}, 1, [&, i](absl::Status s) {
        results[i] = s;
        if (++answered == kBatches) all_done.Notify();
      });
    }
    all_done.WaitForNotification();
    stats = committer.stats();
  }
  for (int i = 0; i < kBatches; ++i) EXPECT_TRUE(results[i].ok()) << "batch " << i << ": " << results[i];
  EXPECT_GE(stats.rounds, 15u);  // at most two batches of 3 in a round of 7
  absl::StatusOr<Store::Contents> got = MakeStore()->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->jobs.size(), 90u);
}

TEST_F(EtcdStoreTest, TheLedgerIsAppendOnly) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  Changes c;
  c.ledger = {Entry(1, 100), Entry(2, -40)};
  ASSERT_TRUE(store->Commit(c).ok());
  // An id written again with another entry fails the whole batch.
  Changes again;
  again.ledger = {Entry(3, 1), Entry(2, -41)};
  again.jobs = {Job(1, "lost")};
  EXPECT_EQ(store->Commit(again).ToString(),
            absl::StrCat("INTERNAL: etcd store: ledger key ", prefix_,
                         "/ledger/00000000000000000002 already holds another entry; nothing written"));
  // The same batch again, as when the answer to its first try was lost:
  // its entries are there as written, so it is done.
  c.jobs = {Job(1, "retried")};
  c.ledger.push_back(Entry(3, 7));
  EXPECT_TRUE(store->Commit(c).ok());
  Changes twice;
  twice.ledger = {Entry(4, 1), Entry(4, 1)};
  EXPECT_EQ(store->Commit(twice).ToString(), "INTERNAL: etcd store: ledger entry 4 twice in one batch");
  absl::StatusOr<Store::Contents> got = store->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Rows(*got), (std::vector<std::string>{"job " + EncodeJob(Job(1, "retried")),
                                                  "ledger " + EncodeBillingRow(Entry(1, 100)),
                                                  "ledger " + EncodeBillingRow(Entry(2, -40)),
                                                  "ledger " + EncodeBillingRow(Entry(3, 7))}));
  EXPECT_EQ(fenced_, 0);
}

TEST_F(EtcdStoreTest, ABadRowIsDataLossNamingItsKey) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  ASSERT_TRUE(client_->Put(prefix_ + "/quotas/acme", "eight").ok());
  EXPECT_EQ(store->LoadAll().status().ToString(),
            absl::StrCat("DATA_LOSS: etcd state, key ", prefix_, "/quotas/acme: quota \"eight\" is no GPU count"));
  ASSERT_TRUE(client_->Put(prefix_ + "/quotas/acme", "8").ok());
  ASSERT_TRUE(client_->Put(prefix_ + "/jobs/00000000000000000001", "{").ok());
  absl::Status s = store->LoadAll().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("etcd state, key ", prefix_, "/jobs/00000000000000000001: ")))
      << s;
}

// Commit latency on one local member, printed for the record (the
// coordinator bench measures throughput; nothing is asserted here).
TEST_F(EtcdStoreTest, CommitLatency) {
  std::unique_ptr<EtcdStore> store = MakeStore();
  for (int records : {1, 100}) {
    std::vector<double> ms;
    for (int round = 0; round < 50; ++round) {
      Changes c;
      for (int i = 0; i < records; ++i) c.jobs.push_back(Job(round * records + i + 1, "bench"));
      const auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE(store->Commit(c).ok());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("etcd commit of %d records, 1 member: p50 %.2f ms, p99 %.2f ms (50 commits)\n", records,
                ms[ms.size() / 2], ms[ms.size() * 99 / 100]);
  }
}

// The only member gone: a commit fails Unavailable (the committer retries).
TEST(EtcdStoreUnavailableTest, AnEtcdErrorIsUnavailable) {
  absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<EtcdUri> uri = ParseEtcdUri((*cluster)->uri());
  ASSERT_TRUE(uri.ok()) << uri.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(*uri, {}, std::chrono::milliseconds(500));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<int64_t> term = (*client)->Put("/athanor/leader", "me");
  ASSERT_TRUE(term.ok()) << term.status();
  EtcdStore::Options options;
  options.prefix = "/athanor";
  options.fence = {"/athanor/leader", Compare::Target::kCreateRevision, Compare::Result::kEqual, *term, ""};
  int fenced = 0;
  options.on_fenced = [&] { ++fenced; };
  EtcdStore store(client->get(), options);
  ASSERT_TRUE((*cluster)->Kill(0).ok());
  Changes c;
  c.jobs = {Job(1, "a")};
  absl::Status s = store.Commit(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), "etcd store: commit of 1 records: ")) << s;
  EXPECT_EQ(store.LoadAll().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fenced, 0);
}

}  // namespace
}  // namespace athanor::coord::etcd
