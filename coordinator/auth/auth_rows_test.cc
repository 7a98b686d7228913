// Security's rows (auth_rows.h) and the reader of the old token rows
// (legacy_auth_rows.h), with exact text both ways; and a TokenStore opened on
// a database holding rows of release 0ca114a.
#include "coordinator/auth/auth_rows.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "coordinator/auth/legacy_auth_rows.h"
#include "coordinator/auth/token_store.h"
#include "security/token.h"

namespace athanor::coord {
namespace {

TokenRecord FixtureToken() {
  TokenRecord t;
  t.id = "0a1b2c3d4e5f6071";
  t.tenant = "fixture-tenant";
  t.role = Role::kUser;
  t.salt = "00112233";
  t.hash = "aabbccdd";
  t.created_unix = 1796297839;
  t.expires_unix = 0;
  t.revoked = false;
  t.description = "fixture user";
  return t;
}

void ExpectSameToken(const TokenRecord& got, const TokenRecord& want) {
  EXPECT_EQ(got.id, want.id);
  EXPECT_EQ(got.tenant, want.tenant);
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.salt, want.salt);
  EXPECT_EQ(got.hash, want.hash);
  EXPECT_EQ(got.created_unix, want.created_unix);
  EXPECT_EQ(got.expires_unix, want.expires_unix);
  EXPECT_EQ(got.revoked, want.revoked);
  EXPECT_EQ(got.description, want.description);
}

TEST(AuthRowsTest, TokenRowText) {
  TokenRecord t = FixtureToken();
  EXPECT_EQ(EncodeToken(t),
            R"({"info":{"id":"0a1b2c3d4e5f6071","tenant":"fixture-tenant","role":"user",)"
            R"("created_unix":"1796297839","description":"fixture user"},"salt":"00112233","hash":"aabbccdd"})");
  t.role = Role::kAdmin;
  t.expires_unix = 1804073839;
  t.revoked = true;
  t.description = "";
  const std::string admin = EncodeToken(t);
  EXPECT_EQ(admin,
            R"({"info":{"id":"0a1b2c3d4e5f6071","tenant":"fixture-tenant","role":"admin",)"
            R"("created_unix":"1796297839","expires_unix":"1804073839","revoked":true},)"
            R"("salt":"00112233","hash":"aabbccdd"})");
  absl::StatusOr<TokenRecord> back = DecodeToken(admin);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameToken(*back, t);
  EXPECT_FALSE(IsLegacyTokenRow(admin));
}

TEST(AuthRowsTest, BadTokenRowsAreDataLoss) {
  absl::StatusOr<TokenRecord> role = DecodeToken(R"({"info":{"id":"x","role":"root"}})");
  EXPECT_EQ(role.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(role.status().message(), "token record: role: 'root' is neither 'user' nor 'admin'");
  absl::StatusOr<TokenRecord> no_id = DecodeToken(R"({"info":{"role":"user"}})");
  EXPECT_EQ(no_id.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(no_id.status().message(), "token record: no id");
  EXPECT_EQ(DecodeToken("not json").status().code(), absl::StatusCode::kDataLoss);
  // A field the row does not have (an old row read as a new one).
  EXPECT_EQ(DecodeToken(R"({"id":"x"})").status().code(), absl::StatusCode::kDataLoss);
}

// The row release 0ca114a wrote (tests/migration/release-0ca114a).
constexpr char kOldUserRow[] =
    R"({"created":1796297839,"description":"fixture user","expires":0,"hash":"aabbccdd",)"
    R"("id":"0a1b2c3d4e5f6071","revoked":false,"role":"user","salt":"00112233","tenant":"fixture-tenant"})";

TEST(AuthRowsTest, OldTokenRowsRead) {
  EXPECT_TRUE(IsLegacyTokenRow(kOldUserRow));
  absl::StatusOr<TokenRecord> t = DecodeLegacyToken(kOldUserRow);
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectSameToken(*t, FixtureToken());
  // Rewritten, it is the new row of the same record.
  EXPECT_EQ(EncodeToken(*t), EncodeToken(FixtureToken()));

  absl::StatusOr<TokenRecord> admin = DecodeLegacyToken(
      R"({"created":1796297840,"description":"fixture admin","expires":1804073840,"hash":"ff",)"
      R"("id":"1111222233334444","revoked":true,"role":"admin","salt":"ee","tenant":"fixture-tenant"})");
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(admin->id, "1111222233334444");
  EXPECT_EQ(admin->role, Role::kAdmin);
  EXPECT_EQ(admin->created_unix, 1796297840);
  EXPECT_EQ(admin->expires_unix, 1804073840);
  EXPECT_TRUE(admin->revoked);
  EXPECT_EQ(admin->salt, "ee");
  EXPECT_EQ(admin->hash, "ff");
  EXPECT_EQ(admin->description, "fixture admin");

  absl::StatusOr<TokenRecord> bad = DecodeLegacyToken(R"({"id":"x","role":"root"})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message(), "token record: role: 'root' is neither 'user' nor 'admin'");
  EXPECT_EQ(DecodeLegacyToken("[1]").status().message(), "token record is not JSON");
  EXPECT_FALSE(IsLegacyTokenRow("[1]"));
}

TEST(AuthRowsTest, TenantPolicyRows) {
  EXPECT_EQ(EncodeTenantPolicy({"fixture-tenant", 5}), R"({"tenant":"fixture-tenant","max_priority":5})");
  EXPECT_EQ(EncodeTenantPolicy({"t", 0}), R"({"tenant":"t"})");
  EXPECT_EQ(EncodeTenantPolicy({"t", -2}), R"({"tenant":"t","max_priority":-2})");
  // The old row (release 0ca114a) reads as it is.
  absl::StatusOr<TenantPolicy> old = DecodeTenantPolicy(R"({"max_priority":5,"tenant":"fixture-tenant"})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->tenant, "fixture-tenant");
  EXPECT_EQ(old->max_priority, 5);
  absl::StatusOr<TenantPolicy> zero = DecodeTenantPolicy(R"({"tenant":"t"})");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->max_priority, 0);
  EXPECT_EQ(DecodeTenantPolicy(R"({"max_priority":5})").status().message(), "tenant policy record: no tenant");
  EXPECT_EQ(DecodeTenantPolicy(R"({"tenant":"t","max_priority":"high"})").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(AuthRowsTest, CredentialsPlaintext) {
  EXPECT_EQ(EncodeCredentials({"AKFIXTURE", "fixture-secret-key", ""}),
            R"({"access_key":"AKFIXTURE","secret_key":"fixture-secret-key"})");
  EXPECT_EQ(EncodeCredentials({"AK", "SK", "ST"}), R"({"access_key":"AK","secret_key":"SK","session_token":"ST"})");
  // What release 0ca114a sealed reads as it is.
  absl::StatusOr<StoreCredentials> old = DecodeCredentials(
      R"({"access_key":"AKFIXTURE","secret_key":"fixture-secret-key","session_token":""})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->access_key, "AKFIXTURE");
  EXPECT_EQ(old->secret_key, "fixture-secret-key");
  EXPECT_EQ(old->session_token, "");
  absl::StatusOr<StoreCredentials> with = DecodeCredentials(R"({"access_key":"AK","secret_key":"SK","session_token":"ST"})");
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->session_token, "ST");
  EXPECT_EQ(DecodeCredentials("{").status().code(), absl::StatusCode::kDataLoss);
}

std::string TempDb() {
  char dir[] = "/tmp/athanor_auth_rows_test.XXXXXX";
  return std::string(mkdtemp(dir)) + "/state.db";
}

void Sql(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "") << " in " << sql;
}

std::string Row(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return out;
}

// A database with release 0ca114a's rows: the token still signs its user in,
// the policy holds, and the token row is rewritten once in the new format.
TEST(TokenStoreTest, OpensOldRowsAndRewritesThem) {
  absl::StatusOr<security::NewToken> n = security::GenerateToken();
  ASSERT_TRUE(n.ok());
  const std::string old_row = std::string(R"({"created":1796297839,"description":"fixture user","expires":0,"hash":")") +
                              n->hash + R"(","id":")" + n->id +
                              R"(","revoked":false,"role":"user","salt":")" + n->salt +
                              R"(","tenant":"fixture-tenant"})";
  const std::string db_path = TempDb();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  Sql(db, "CREATE TABLE tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);"
          "CREATE TABLE tenant_policies (tenant TEXT PRIMARY KEY, record TEXT NOT NULL);");
  Sql(db, "INSERT INTO tokens VALUES ('" + n->id + "', '" + old_row + "')");
  Sql(db, R"(INSERT INTO tenant_policies VALUES ('fixture-tenant', '{"max_priority":5,"tenant":"fixture-tenant"}'))");

  FakeClock clock;
  {
    auto store = TokenStore::Open(db_path, &clock, 0);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<Identity> who = (*store)->Authenticate(n->token);
    ASSERT_TRUE(who.ok()) << who.status();
    EXPECT_EQ(who->tenant, "fixture-tenant");
    EXPECT_EQ(who->role, Role::kUser);
    EXPECT_EQ(who->token_id, n->id);
    EXPECT_EQ((*store)->MaxPriority("fixture-tenant"), 5);
    ASSERT_EQ((*store)->List("").size(), 1u);
    EXPECT_EQ((*store)->List("")[0].description, "fixture user");
    EXPECT_EQ((*store)->List("")[0].created_unix, 1796297839);
  }
  EXPECT_EQ(Row(db, "SELECT record FROM tokens"),
            R"({"info":{"id":")" + n->id + R"(","tenant":"fixture-tenant","role":"user",)" +
                R"("created_unix":"1796297839","description":"fixture user"},"salt":")" + n->salt +
                R"(","hash":")" + n->hash + R"("})");
  // The policy row was already of the new shape: left as it was.
  EXPECT_EQ(Row(db, "SELECT record FROM tenant_policies"), R"({"max_priority":5,"tenant":"fixture-tenant"})");
  // Opened again, from the rewritten row.
  auto again = TokenStore::Open(db_path, &clock, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Authenticate(n->token).ok());
  // A new policy is written in the new format.
  ASSERT_TRUE((*again)->SetMaxPriority("fixture-tenant", 7).ok());
  EXPECT_EQ(Row(db, "SELECT record FROM tenant_policies"), R"({"tenant":"fixture-tenant","max_priority":7})");
  sqlite3_close(db);
}

TEST(TokenStoreTest, BadRowFailsTheOpenNamingIt) {
  const std::string db_path = TempDb();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  Sql(db, "CREATE TABLE tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);");
  Sql(db, R"(INSERT INTO tokens VALUES ('x', '{"info":{"id":"x","role":"root"}}'))");
  sqlite3_close(db);
  FakeClock clock;
  auto store = TokenStore::Open(db_path, &clock, 0);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store.status().message(),
            "state database, tokens: token record: role: 'root' is neither 'user' nor 'admin'");
}

}  // namespace
}  // namespace athanor::coord
