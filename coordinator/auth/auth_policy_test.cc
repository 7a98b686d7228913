#include <stdlib.h>
#include <sys/stat.h>

#include <set>

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/auth_setup.h"
#include "coordinator/auth/auth_submit.h"
#include "coordinator/auth/token_store.h"
#include "proto/athanor.pb.h"
#include "proto/athanor_interactive.pb.h"

namespace athanor::coord {
namespace {

std::string TempDb() {
  char dir[] = "/tmp/athanor_auth_test.XXXXXX";
  return std::string(mkdtemp(dir)) + "/state.db";
}

// Every method of every service the coordinator serves has exactly one line
// in the table: a new RPC without one fails here (and is denied at run time).
TEST(AuthPolicyTest, EveryCoordinatorRpcHasARule) {
  std::set<std::string> methods;
  // Every service of athanor.proto but AgentControl, which agents serve, and
  // every one of athanor_data.proto (Images, Volumes, NodeData).
  const google::protobuf::FileDescriptor* main_file = rpc::Job::descriptor()->file();
  const google::protobuf::FileDescriptor* data_file = rpc::Image::descriptor()->file();
  // athanor_interactive.proto: Interactive and WorkdirData (AgentInteractive is the agents').
  const google::protobuf::FileDescriptor* interactive_file = rpc::ShellInput::descriptor()->file();
  ASSERT_EQ(main_file->service_count(), 7);
  ASSERT_EQ(data_file->service_count(), 3);
  ASSERT_EQ(interactive_file->service_count(), 3);
  for (const google::protobuf::FileDescriptor* file : {main_file, data_file, interactive_file}) {
    for (int k = 0; k < file->service_count(); ++k) {
      const google::protobuf::ServiceDescriptor* s = file->service(k);
      const std::string service = s->name();
      if (service == "AgentControl" || service == "AgentInteractive") continue;
      for (int i = 0; i < s->method_count(); ++i) {
        std::string name = absl::StrCat(service, ".", s->method(i)->name());
        methods.insert(name);
        EXPECT_NE(FindAuthRule(name), nullptr) << name << " is not in the authorisation table";
      }
    }
  }
  for (const AuthRule* r = AuthRulesBegin(); r != AuthRulesEnd(); ++r) {
    EXPECT_EQ(methods.count(std::string(r->method)), 1u) << r->method << " names no RPC";
  }
  EXPECT_EQ(FindAuthRule("Coordinator.NoSuchRpc"), nullptr);
}

TEST(AuthPolicyTest, OwnershipRules) {
  Authorizer auth(nullptr, false);
  Identity alice{Role::kUser, "alice", "t1", "", false};
  Identity admin{Role::kAdmin, "admin", "t2", "", false};
  Identity agent_a{Role::kNone, "", "", "node-a", false};
  EXPECT_TRUE(auth.CheckOwner(alice, "Coordinator.CancelJob", {.tenant = "alice"}).ok());
  absl::Status s = auth.CheckOwner(alice, "Coordinator.CancelJob", {.tenant = "bob"});
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "Coordinator.CancelJob: tenant 'bob' is not the caller's (user alice (token t1))");
  EXPECT_TRUE(auth.CheckOwner(admin, "Coordinator.CancelJob", {.tenant = "bob"}).ok());
  EXPECT_TRUE(auth.CheckOwner(agent_a, "NodeAgent.Heartbeat", {.node = "node-a"}).ok());
  EXPECT_EQ(auth.CheckOwner(agent_a, "NodeAgent.Heartbeat", {.node = "node-b"}).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(auth.CheckOwner(agent_a, "NodeAgent.ReportCheckpoint", {.nodes = {"node-b", "node-a"}}).ok());
  EXPECT_EQ(auth.CheckOwner(agent_a, "NodeAgent.ReportCheckpoint", {.nodes = {"node-b"}}).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(auth.CheckOwner(admin, "Coordinator.NoSuchRpc", {}).code(),
            absl::StatusCode::kPermissionDenied);
}

// Billing: prices are public, bills and balances a tenant's own, the rest
// an admin's; no agent makes any of its calls.
TEST(AuthPolicyTest, BillingRules) {
  struct Expected {
    const char* method;
    bool user;
    Owner owner;
  };
  const Expected expected[] = {
      {"Billing.ListPrices", true, Owner::kNone},   {"Billing.GetBill", true, Owner::kTenant},
      {"Billing.ListBalances", true, Owner::kTenant}, {"Billing.SetPrice", false, Owner::kNone},
      {"Billing.SetPlan", false, Owner::kNone},     {"Billing.ListPlans", false, Owner::kNone},
      {"Billing.AddCredit", false, Owner::kNone},   {"Billing.ListLedger", false, Owner::kNone},
  };
  int billing_rules = 0;
  for (const AuthRule* r = AuthRulesBegin(); r != AuthRulesEnd(); ++r) {
    billing_rules += absl::StartsWith(r->method, "Billing.") ? 1 : 0;
  }
  EXPECT_EQ(billing_rules, 8);
  for (const Expected& e : expected) {
    const AuthRule* rule = FindAuthRule(e.method);
    ASSERT_NE(rule, nullptr) << e.method;
    EXPECT_EQ(rule->user, e.user) << e.method;
    EXPECT_TRUE(rule->admin) << e.method;
    EXPECT_FALSE(rule->agent) << e.method;
    EXPECT_EQ(rule->owner, e.owner) << e.method;
  }

  Authorizer auth(nullptr, false);
  Identity alice{Role::kUser, "alice", "t1", "", false};
  Identity admin{Role::kAdmin, "admin", "t2", "", false};
  for (const char* method : {"Billing.GetBill", "Billing.ListBalances"}) {
    EXPECT_TRUE(auth.CheckOwner(alice, method, {.tenant = "alice"}).ok()) << method;
    absl::Status s = auth.CheckOwner(alice, method, {.tenant = "bob"});
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << method;
    EXPECT_EQ(s.message(),
              absl::StrCat(method, ": tenant 'bob' is not the caller's (user alice (token t1))"));
    EXPECT_TRUE(auth.CheckOwner(admin, method, {.tenant = "bob"}).ok()) << method;
  }
  // Prices are the same for everyone: no tenant to own.
  EXPECT_TRUE(auth.CheckOwner(alice, "Billing.ListPrices", {.tenant = "bob"}).ok());
}

TEST(TokenStoreTest, ExpiryRevocationAndPersistence) {
  std::string db = TempDb();
  FakeClock clock;
  std::string token, id;
  {
    auto store = TokenStore::Open(db, &clock, 0);
    ASSERT_TRUE(store.ok()) << store.status();
    struct stat st;
    ASSERT_EQ(stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    auto made = (*store)->Create("alice", Role::kUser, 60, "ci");
    ASSERT_TRUE(made.ok()) << made.status();
    token = made->token;
    id = made->record.id;
    absl::StatusOr<Identity> who = (*store)->Authenticate(token);
    ASSERT_TRUE(who.ok()) << who.status();
    EXPECT_EQ(who->tenant, "alice");
    EXPECT_EQ(who->role, Role::kUser);
    ASSERT_TRUE((*store)->SetMaxPriority("alice", 7).ok());
  }
  // Reopened: the token and the policy survived; only the hash was kept.
  auto store = TokenStore::Open(db, &clock, 0);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ((*store)->List("").size(), 1u);
  EXPECT_EQ((*store)->List("")[0].hash.find(token.substr(21)), std::string::npos);
  EXPECT_EQ((*store)->MaxPriority("alice"), 7);
  EXPECT_EQ((*store)->MaxPriority("bob"), 0);
  EXPECT_TRUE((*store)->Authenticate(token).ok());
  // A wrong secret for a real id.
  std::string forged = token.substr(0, 21) + std::string(64, '0');
  EXPECT_EQ((*store)->Authenticate(forged).status().message(), "token " + id + " is not known");
  clock.Advance(Seconds(60));
  EXPECT_EQ((*store)->Authenticate(token).status().message(),
            absl::StrCat("token ", id, " expired at unix time ", 1'700'000'060));
  auto forever = (*store)->Create("alice", Role::kAdmin, 0, "");
  ASSERT_TRUE(forever.ok());
  ASSERT_TRUE((*store)->Revoke(forever->record.id).ok());
  absl::StatusOr<Identity> revoked = (*store)->Authenticate(forever->token);
  EXPECT_EQ(revoked.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(revoked.status().message(), "token " + forever->record.id + " was revoked");
  EXPECT_EQ((*store)->Revoke("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(SubmissionGuardTest, TenantPriorityUrisAndRate) {
  std::string db = TempDb();
  FakeClock clock;
  auto store = TokenStore::Open(db, &clock, 0);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->SetMaxPriority("alice", 5).ok());
  SubmissionGuard guard(store->get(), &clock, {.rate_per_s = 1, .burst = 2,
                                               .allowed_endpoints = {"http://minio:9000"}});
  Identity alice{Role::kUser, "alice", "t1", "", false};
  JobSpec spec;
  spec.priority = 5;
  ASSERT_TRUE(guard.Admit(alice, "mallory", &spec).ok());
  EXPECT_EQ(spec.tenant, "alice");  // from the token, not the metadata
  spec.tenant = "bob";
  EXPECT_EQ(guard.Admit(alice, "", &spec).message(),
            "tenant: 'bob' is not the caller's tenant 'alice' (a job's tenant comes from its "
            "submitter's token)");
  spec.tenant = "alice";
  spec.priority = 6;
  EXPECT_EQ(guard.Admit(alice, "", &spec).code(), absl::StatusCode::kPermissionDenied);
  spec.priority = 0;
  // The bucket (burst 2) had one token left.
  ASSERT_TRUE(guard.Admit(alice, "", &spec).ok());
  absl::Status limited = guard.Admit(alice, "", &spec);
  EXPECT_EQ(limited.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(limited.message(),
            "submission rate limit reached (1 jobs/s, bursts of 2): retry in 1.00 s");
  clock.Advance(Seconds(1));
  EXPECT_TRUE(guard.Admit(alice, "", &spec).ok());
  // Admins may name a tenant, and are not rate limited.
  Identity admin{Role::kAdmin, "admin", "t2", "", false};
  spec.tenant = "bob";
  spec.priority = 100;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(guard.Admit(admin, "", &spec).ok());
  EXPECT_EQ(spec.tenant, "bob");
}

TEST(SubmissionGuardTest, StoreUrisCarryNoCredentialsAndOnlyAllowedEndpoints) {
  std::vector<std::string> allowed = {"http://minio:9000"};
  EXPECT_TRUE(CheckStoreUri("checkpoint_uri", "file:///ckpt", allowed).ok());
  EXPECT_TRUE(CheckStoreUri("checkpoint_uri", "s3://b/p?endpoint=http://minio:9000/", allowed).ok());
  EXPECT_TRUE(CheckStoreUri("checkpoint_uri", "s3://b/p?region=eu-west-1", allowed).ok());
  absl::Status s = CheckStoreUri("checkpoint_uri", "s3://b/p?secret_key=AAA&access_key=K", allowed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("AAA"), std::string::npos);
  EXPECT_EQ(CheckStoreUri("checkpoint_uri", "s3://key:secret@b/p", allowed).code(),
            absl::StatusCode::kInvalidArgument);
  s = CheckStoreUri("checkpoint_uri", "s3://b/p?endpoint=http://169.254.169.254", allowed);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "checkpoint_uri: endpoint 'http://169.254.169.254' is not on the "
                         "coordinator's allow-list (--allow-store-endpoint)");
}

TEST(AuthSetupTest, InsecureOnlyOnLoopback) {
  EXPECT_TRUE(security::IsLoopbackListen("127.0.0.1:7700"));
  EXPECT_TRUE(security::IsLoopbackListen("localhost:7700"));
  EXPECT_TRUE(security::IsLoopbackListen("[::1]:7700"));
  EXPECT_TRUE(security::IsLoopbackListen("127.0.0.1:0"));
  EXPECT_FALSE(security::IsLoopbackListen("127.0.0.1"));
  EXPECT_FALSE(security::IsLoopbackListen("127.evil.example:7700"));
  EXPECT_FALSE(security::IsLoopbackListen("0.0.0.0:7700"));
  EXPECT_FALSE(security::IsLoopbackListen("10.0.0.1:7700"));
  SecurityFlags flags;
  auto none = CoordinatorSecurity::Create(flags, "127.0.0.1:1", TempDb(), RealClock::Get());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  flags.insecure = true;
  auto open = CoordinatorSecurity::Create(flags, "0.0.0.0:1", TempDb(), RealClock::Get());
  EXPECT_EQ(open.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CoordinatorSecurity::Create(flags, "127.0.0.1:1", TempDb(), RealClock::Get()).ok());
}

}  // namespace
}  // namespace athanor::coord
