// EtcdClient against a real 3-member etcd cluster (testing/etcd), and
// ParseEtcdUri / PrefixEnd on their own.
#include "coordinator/store/etcd/etcd_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "testing/coordinator/watchdog.h"
#include "testing/etcd/etcd_cluster.h"

namespace athanor::coord::etcd {
namespace {

using ::athanor::testing_etcd::EtcdCluster;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::vector<std::string> Keys(const std::vector<KeyValue>& kvs) {
  std::vector<std::string> out;
  for (const KeyValue& kv : kvs) out.push_back(kv.key);
  return out;
}

// --- ParseEtcdUri and PrefixEnd -------------------------------------------

TEST(ParseEtcdUriTest, GoodForms) {
  absl::StatusOr<EtcdUri> u = ParseEtcdUri("etcd://127.0.0.1:2379,etcd-2.example:2380/athanor/prod");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(u->endpoints, ElementsAre("127.0.0.1:2379", "etcd-2.example:2380"));
  EXPECT_EQ(u->prefix, "/athanor/prod");

  u = ParseEtcdUri("etcd://h:1");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(u->endpoints, ElementsAre("h:1"));
  EXPECT_EQ(u->prefix, "/athanor");

  u = ParseEtcdUri("etcd://h:65535/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->prefix, "/athanor");

  u = ParseEtcdUri("etcd://[::1]:2379/a_b.c-d/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_THAT(u->endpoints, ElementsAre("[::1]:2379"));
  EXPECT_EQ(u->prefix, "/a_b.c-d");
}

TEST(ParseEtcdUriTest, BadFormsSayWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://h:2379", "etcd URI 'http://h:2379': expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"},
      {"etcd://", "etcd URI 'etcd://': no endpoint"},
      {"etcd:///p", "etcd URI 'etcd:///p': no endpoint"},
      {"etcd://h1:2379,,h2:2379", "etcd URI 'etcd://h1:2379,,h2:2379': empty endpoint"},
      {"etcd://h1/p", "etcd URI 'etcd://h1/p': endpoint 'h1' has no port (expected HOST:PORT)"},
      {"etcd://h1:", "etcd URI 'etcd://h1:': endpoint 'h1:' has no port (expected HOST:PORT)"},
      {"etcd://:2379", "etcd URI 'etcd://:2379': endpoint ':2379' has no host"},
      {"etcd://h_1:2379", "etcd URI 'etcd://h_1:2379': endpoint 'h_1:2379' has a bad host"},
      {"etcd://u@h:2379", "etcd URI 'etcd://u@h:2379': endpoint 'u@h:2379' has a bad host"},
      {"etcd://[::1]/p", "etcd URI 'etcd://[::1]/p': endpoint '[::1]' has no port (expected HOST:PORT)"},
      {"etcd://[]:1", "etcd URI 'etcd://[]:1': endpoint '[]:1' has a bad host"},
      {"etcd://h:0", "etcd URI 'etcd://h:0': endpoint 'h:0' has a bad port '0' (expected 1..65535)"},
      {"etcd://h:65536", "etcd URI 'etcd://h:65536': endpoint 'h:65536' has a bad port '65536' (expected 1..65535)"},
      {"etcd://h:12ab", "etcd URI 'etcd://h:12ab': endpoint 'h:12ab' has a bad port '12ab' (expected 1..65535)"},
      {"etcd://h:2379/a b", "etcd URI 'etcd://h:2379/a b': prefix '/a b' may hold only [A-Za-z0-9_./-]"},
      {"etcd://h:2379/a?x=1", "etcd URI 'etcd://h:2379/a?x=1': prefix '/a?x=1' may hold only [A-Za-z0-9_./-]"},
  };
  for (const auto& [uri, message] : cases) {
    absl::StatusOr<EtcdUri> u = ParseEtcdUri(uri);
    ASSERT_FALSE(u.ok()) << uri;
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << uri;
    EXPECT_EQ(u.status().message(), message) << uri;
  }
  std::string many = "etcd://";
  for (int i = 0; i < 33; ++i) absl::StrAppend(&many, i ? "," : "", "h:", i + 1);
  absl::StatusOr<EtcdUri> u = ParseEtcdUri(many);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().message(), absl::StrCat("etcd URI '", many, "': more than 32 endpoints"));
}

TEST(PrefixEndTest, IncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdClientCreateTest, RefusesBadOptions) {
  EtcdUri none;
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(none);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "etcd: no endpoint");
  EtcdUri one{{"127.0.0.1:1"}, "/p"};
  c = EtcdClient::Create(one, {}, std::chrono::milliseconds(0));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "etcd: the call timeout must be positive");
  c = EtcdClient::Create(one, EtcdTls{"", "c.pem", "k.pem"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "etcd: a client certificate needs a CA file too");
  c = EtcdClient::Create(one, EtcdTls{"/nonexistent/ca.pem", "", ""});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
}

// --- Against a real cluster ------------------------------------------------

class EtcdClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bench::ArmWatchdog(240, "etcd_client_test: hung (watchdog)\n");
    absl::StatusOr<std::unique_ptr<EtcdCluster>> c = EtcdCluster::Start(3);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr) << "no etcd cluster (see the first failure)";
    absl::StatusOr<EtcdUri> uri = ParseEtcdUri(cluster_->uri("t"));
    ASSERT_TRUE(uri.ok()) << uri.status();
    absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(*uri);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  static EtcdCluster* cluster_;
  std::unique_ptr<EtcdClient> client_;
};
EtcdCluster* EtcdClientTest::cluster_ = nullptr;

TEST_F(EtcdClientTest, PutAndRange) {
  absl::StatusOr<int64_t> rev_a = client_->Put("/kv/a", "1");
  ASSERT_TRUE(rev_a.ok()) << rev_a.status();
  absl::StatusOr<int64_t> rev_b = client_->Put("/kv/b", "2");
  ASSERT_TRUE(rev_b.ok()) << rev_b.status();
  EXPECT_EQ(*rev_b, *rev_a + 1);
  ASSERT_TRUE(client_->Put("/kv/c", "3").ok());
  ASSERT_TRUE(client_->Put("/kw", "outside").ok());

  absl::StatusOr<RangeResult> one = client_->Range("/kv/b");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].key, "/kv/b");
  EXPECT_EQ(one->kvs[0].value, "2");
  EXPECT_EQ(one->kvs[0].create_revision, *rev_b);
  EXPECT_EQ(one->kvs[0].mod_revision, *rev_b);
  EXPECT_EQ(one->kvs[0].version, 1);
  EXPECT_EQ(one->kvs[0].lease, 0);
  EXPECT_EQ(one->revision, *rev_b + 2);
  EXPECT_FALSE(one->more);

  absl::StatusOr<RangeResult> all = client_->Range("/kv/", PrefixEnd("/kv/"));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Keys(all->kvs), ElementsAre("/kv/a", "/kv/b", "/kv/c"));
  EXPECT_FALSE(all->more);

  absl::StatusOr<RangeResult> page = client_->Range("/kv/", PrefixEnd("/kv/"), 2);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(Keys(page->kvs), ElementsAre("/kv/a", "/kv/b"));
  EXPECT_TRUE(page->more);

  absl::StatusOr<RangeResult> none = client_->Range("/kv/missing");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->kvs.empty());

  absl::StatusOr<int64_t> rev_a2 = client_->Put("/kv/a", "1b");
  ASSERT_TRUE(rev_a2.ok()) << rev_a2.status();
  absl::StatusOr<RangeResult> a = client_->Range("/kv/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->kvs.size(), 1u);
  EXPECT_EQ(a->kvs[0].value, "1b");
  EXPECT_EQ(a->kvs[0].version, 2);
  EXPECT_EQ(a->kvs[0].create_revision, *rev_a);
  EXPECT_EQ(a->kvs[0].mod_revision, *rev_a2);

  absl::StatusOr<RangeResult> bad = client_->Range("/kv/", "", -1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "etcd: Range: negative limit");
}

TEST_F(EtcdClientTest, TxnRunsTheBranchItsComparisonsChoose) {
  // Create-if-absent: the first succeeds, the second runs the failure branch
  // and reads what is there.
  Compare absent{"/txn/k", Compare::Target::kVersion, Compare::Result::kEqual, 0, ""};
  absl::StatusOr<TxnResult> first =
      client_->Txn({absent}, {Op::Put("/txn/k", "first"), Op::Range("/txn/k")}, {Op::Range("/txn/k")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  ASSERT_EQ(first->ranges.size(), 1u);
  ASSERT_EQ(first->ranges[0].size(), 1u);
  EXPECT_EQ(first->ranges[0][0].value, "first");
  EXPECT_EQ(first->ranges[0][0].create_revision, first->revision);

  absl::StatusOr<TxnResult> second =
      client_->Txn({absent}, {Op::Put("/txn/k", "second")}, {Op::Range("/txn/k"), Op::Put("/txn/lost", "1")});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->ranges.size(), 1u);
  ASSERT_EQ(second->ranges[0].size(), 1u);
  EXPECT_EQ(second->ranges[0][0].value, "first");
  EXPECT_EQ(second->revision, first->revision + 1);  // the failure branch's put

  // A fence on the create revision, and a value comparison.
  Compare fence{"/txn/k", Compare::Target::kCreateRevision, Compare::Result::kEqual, first->revision, ""};
  Compare value{"/txn/k", Compare::Target::kValue, Compare::Result::kEqual, 0, "first"};
  absl::StatusOr<TxnResult> fenced =
      client_->Txn({fence, value}, {Op::Put("/txn/a", "x"), Op::Put("/txn/b", "y"), Op::Delete("/txn/lost")});
  ASSERT_TRUE(fenced.ok()) << fenced.status();
  EXPECT_TRUE(fenced->succeeded);
  EXPECT_TRUE(fenced->ranges.empty());
  absl::StatusOr<RangeResult> all = client_->Range("/txn/", PrefixEnd("/txn/"));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Keys(all->kvs), ElementsAre("/txn/a", "/txn/b", "/txn/k"));

  Compare stale{"/txn/k", Compare::Target::kCreateRevision, Compare::Result::kEqual, first->revision - 1, ""};
  absl::StatusOr<TxnResult> refused = client_->Txn({stale}, {Op::Delete("/txn/", PrefixEnd("/txn/"))});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_FALSE(refused->succeeded);
  all = client_->Range("/txn/", PrefixEnd("/txn/"));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->kvs.size(), 3u);

  // More operations than the cluster's --max-txn-ops (4096): etcd refuses.
  std::vector<Op> many;
  for (int i = 0; i < 4097; ++i) many.push_back(Op::Put(absl::StrCat("/txn/many/", i), "v"));
  absl::StatusOr<TxnResult> too_many = client_->Txn({}, many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument) << too_many.status();
  EXPECT_THAT(std::string(too_many.status().message()),
              MatchesRegex("etcd 127\\.0\\.0\\.1:[0-9]+: Txn: etcdserver: too many operations in txn request"));
}

TEST_F(EtcdClientTest, LeaseGrantKeepAliveRevoke) {
  absl::StatusOr<Lease> lease = client_->GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(lease->id, 0);
  EXPECT_EQ(lease->ttl_s, 30);
  ASSERT_TRUE(client_->Put("/lease/owned", "mine", lease->id).ok());
  absl::StatusOr<RangeResult> r = client_->Range("/lease/owned");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].lease, lease->id);

  absl::StatusOr<int64_t> ttl = client_->KeepAlive(lease->id);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, 30);

  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  r = client_->Range("/lease/owned");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->kvs.empty());

  ttl = client_->KeepAlive(lease->id);
  ASSERT_FALSE(ttl.ok());
  EXPECT_EQ(ttl.status().code(), absl::StatusCode::kNotFound) << ttl.status();
  EXPECT_THAT(std::string(ttl.status().message()),
              MatchesRegex(absl::StrCat("etcd 127\\.0\\.0\\.1:[0-9]+: KeepAlive: lease ", lease->id,
                                        " expired or was revoked")));
  absl::Status again = client_->RevokeLease(lease->id);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound) << again;
  EXPECT_THAT(std::string(again.message()),
              MatchesRegex("etcd 127\\.0\\.0\\.1:[0-9]+: RevokeLease: etcdserver: requested lease not found"));

  absl::StatusOr<Lease> bad = client_->GrantLease(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "etcd: GrantLease: TTL 0 s");
}

TEST_F(EtcdClientTest, MembersListsEveryMemberWithOneLeader) {
  absl::StatusOr<std::vector<MemberStatus>> members = client_->Members();
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 3u);
  std::vector<std::string> names, urls;
  int leaders = 0;
  for (const MemberStatus& m : *members) {
    names.push_back(m.name);
    ASSERT_EQ(m.client_urls.size(), 1u);
    urls.push_back(m.client_urls[0]);
    EXPECT_TRUE(m.reachable) << m.name;
    EXPECT_NE(m.id, 0u);
    EXPECT_GT(m.raft_index, 0) << m.name;
    EXPECT_GT(m.raft_term, 0) << m.name;
    EXPECT_GT(m.db_size, 0) << m.name;
    leaders += m.is_leader ? 1 : 0;
  }
  EXPECT_EQ(leaders, 1);
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("m0", "m1", "m2"));
  std::vector<std::string> expected;
  for (const std::string& e : cluster_->endpoints()) expected.push_back("http://" + e);
  std::sort(urls.begin(), urls.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(urls, expected);
}

// A cluster of its own: members die here.
TEST(EtcdClientFailoverTest, CallsGoOnWhenAMemberDies) {
  bench::ArmWatchdog(240, "etcd_client_test: failover hung (watchdog)\n");
  absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster = EtcdCluster::Start(3);
  fprintf(stderr, "T1 %ld line 1\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  fprintf(stderr, "T2 %ld line 2\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  absl::StatusOr<EtcdUri> uri = ParseEtcdUri((*cluster)->uri("f"));
  fprintf(stderr, "T3 %ld line 3\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(uri.ok()) << uri.status();
  fprintf(stderr, "T4 %ld line 4\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(*uri);
  fprintf(stderr, "T5 %ld line 5\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(c.ok()) << c.status();
  fprintf(stderr, "T6 %ld line 6\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  EtcdClient& client = **c;
  absl::StatusOr<Lease> lease = client.GrantLease(30);
  fprintf(stderr, "T7 %ld line 7\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(lease.ok()) << lease.status();
  fprintf(stderr, "T8 %ld line 8\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(client.Put("/f/before", "1").ok());
  fprintf(stderr, "T9 %ld line 9\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());

  // Member 0 is the one the client has used so far (the first endpoint).
  ASSERT_TRUE((*cluster)->Kill(0).ok());
  fprintf(stderr, "T10 %ld line 10\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  absl::StatusOr<int64_t> put = client.Put("/f/after", "2");
  fprintf(stderr, "T11 %ld line 11\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(put.ok()) << put.status();
  fprintf(stderr, "T12 %ld line 12\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  absl::StatusOr<RangeResult> r = client.Range("/f/", PrefixEnd("/f/"));
  fprintf(stderr, "T13 %ld line 13\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(r.ok()) << r.status();
  fprintf(stderr, "T14 %ld line 14\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  EXPECT_THAT(Keys(r->kvs), ElementsAre("/f/after", "/f/before"));
  absl::StatusOr<int64_t> ttl = client.KeepAlive(lease->id);
  fprintf(stderr, "T15 %ld line 15\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  fprintf(stderr, "T16 %ld line 16\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  EXPECT_EQ(*ttl, 30);

  // The put above committed, so the two left agree on a leader.
  absl::StatusOr<std::vector<MemberStatus>> members = client.Members();
  fprintf(stderr, "T17 %ld line 17\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(members.ok()) << members.status();
  fprintf(stderr, "T18 %ld line 18\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_EQ(members->size(), 3u);
  int reachable = 0, leaders = 0;
  for (const MemberStatus& m : *members) {
    EXPECT_EQ(m.reachable, m.name != "m0") << m.name;
    reachable += m.reachable ? 1 : 0;
    leaders += m.is_leader ? 1 : 0;
  }
  EXPECT_EQ(reachable, 2);
  EXPECT_EQ(leaders, 1);

  // Back on its data: it answers again, through the client's old channel.
  ASSERT_TRUE((*cluster)->Restart(0).ok());
  fprintf(stderr, "T19 %ld line 19\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  members = client.Members();
  fprintf(stderr, "T20 %ld line 20\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(members.ok()) << members.status();
  fprintf(stderr, "T21 %ld line 21\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  for (const MemberStatus& m : *members) EXPECT_TRUE(m.reachable) << m.name;

  // With no member left, calls fail Unavailable, naming a member and the call.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*cluster)->Kill(i).ok());
  c = EtcdClient::Create(*uri, {}, std::chrono::milliseconds(1000));
  fprintf(stderr, "T22 %ld line 22\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_TRUE(c.ok()) << c.status();
  fprintf(stderr, "T23 %ld line 23\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  absl::StatusOr<int64_t> lost = (*c)->Put("/f/lost", "x");
  fprintf(stderr, "T24 %ld line 24\n", (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_THAT(std::string(lost.status().message()), MatchesRegex("etcd 127\\.0\\.0\\.1:[0-9]+: Put: .*"));
  bench::DisarmWatchdog();
}

}  // namespace
}  // namespace athanor::coord::etcd
