#include "coordinator/auth/token_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "coordinator/auth/auth_rows.h"
#include "coordinator/auth/legacy_auth_rows.h"
#include "coordinator/model/validation.h"
#include "security/token.h"

namespace athanor::coord {
namespace {

constexpr char kBootstrapId[] = "bootstrap";

absl::Status ExecSql(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite: ", err ? err : "error", " in ", sql));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::Status Unauthenticated(const std::string& why) {
  return absl::UnauthenticatedError(why);
}

}  // namespace

TokenStore::TokenStore(sqlite3* db, const Clock* clock, int32_t default_max_priority)
    : clock_(clock), default_max_priority_(default_max_priority), db_(db) {}

TokenStore::~TokenStore() { sqlite3_close(db_); }

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& path,
                                                             const Clock* clock,
                                                             int32_t default_max_priority) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(absl::StrCat(
        "cannot open state database ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  // It holds token hashes and tenants' limits: owner only (-wal and -shm
  // files inherit the database's mode).
  chmod(path.c_str(), 0600);
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<TokenStore> store(new TokenStore(db, clock, default_max_priority));
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(store->Exec(
      "CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS tenant_policies (tenant TEXT PRIMARY KEY, record TEXT NOT NULL);"));
  RETURN_IF_ERROR(store->Load());
  return store;
}

absl::Status TokenStore::Exec(const std::string& sql) {
  absl::MutexLock lock(&mu_);
  return ExecSql(db_, sql);
}

absl::Status TokenStore::Load() {
  absl::MutexLock lock(&mu_);
  std::vector<TokenRecord> legacy;  // old rows, written back below
  for (const char* table : {"tokens", "tenant_policies"}) {
    sqlite3_stmt* st = nullptr;
    std::string sql = absl::StrCat("SELECT record FROM ", table);
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("sqlite ", sql, ": ", sqlite3_errmsg(db_)));
    }
    const bool tokens = std::string_view(table) == "tokens";
    int rc;
    absl::Status status;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      std::string_view text(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                            sqlite3_column_bytes(st, 0));
      if (tokens) {
        const bool old = IsLegacyTokenRow(text);
        absl::StatusOr<TokenRecord> t = old ? DecodeLegacyToken(text) : DecodeToken(text);
        if (!t.ok()) {
          status = absl::DataLossError(absl::StrCat("state database, tokens: ", t.status().message()));
          break;
        }
        if (old) legacy.push_back(*t);
        tokens_[t->id] = *std::move(t);
      } else {
        absl::StatusOr<TenantPolicy> p = DecodeTenantPolicy(text);
        if (!p.ok()) {
          status = absl::DataLossError(absl::StrCat("state database, tenant_policies: ", p.status().message()));
          break;
        }
        policies_[p->tenant] = *p;
      }
    }
    sqlite3_finalize(st);
    RETURN_IF_ERROR(status);
  }
  if (legacy.empty()) return absl::OkStatus();
  // Rows of releases up to 0ca114a (legacy_auth_rows.h): rewritten once, in
  // one transaction, so the old format is never read again.
  RETURN_IF_ERROR(ExecSql(db_, "BEGIN IMMEDIATE"));
  for (const TokenRecord& t : legacy) {
    if (absl::Status s = Put("tokens", t.id, EncodeToken(t)); !s.ok()) {
      ExecSql(db_, "ROLLBACK").IgnoreError();  // nothing was written; the cause is `s`
      return s;
    }
  }
  return ExecSql(db_, "COMMIT");
}

absl::Status TokenStore::Put(const char* table, const std::string& key, const std::string& value) {
  sqlite3_stmt* st = nullptr;
  std::string sql = absl::StrCat("INSERT OR REPLACE INTO ", table, " VALUES (?, ?)");
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite ", sql, ": ", sqlite3_errmsg(db_)));
  }
  sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    return absl::UnavailableError(absl::StrCat("sqlite write to ", table, ": ", sqlite3_errmsg(db_)));
  }
  return absl::OkStatus();
}

absl::Status TokenStore::AddBootstrapAdmin(const std::string& token) {
  ASSIGN_OR_RETURN(security::ParsedToken p, security::ParseToken(token));
  TokenRecord t;
  t.id = kBootstrapId;
  t.tenant = "admin";
  t.role = Role::kAdmin;
  ASSIGN_OR_RETURN(t.salt, security::RandomHex(16));
  t.hash = security::HashSecret(t.salt, p.secret);
  t.description = "bootstrap admin token (file)";
  absl::MutexLock lock(&mu_);
  tokens_[p.id] = t;  // found by the file token's own id
  return absl::OkStatus();
}

absl::StatusOr<TokenStore::Created> TokenStore::Create(const std::string& tenant, Role role,
                                                       int64_t ttl_s,
                                                       const std::string& description) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  if (ttl_s < 0) return absl::InvalidArgumentError("ttl_s: must be >= 0");
  if (description.size() > 256) return absl::InvalidArgumentError("description: longer than 256 bytes");
  if (role == Role::kNone) return absl::InvalidArgumentError("role: must be user or admin");
  ASSIGN_OR_RETURN(security::NewToken n, security::GenerateToken());
  Created c;
  c.token = n.token;
  c.record.id = n.id;
  c.record.tenant = tenant;
  c.record.role = role;
  c.record.salt = n.salt;
  c.record.hash = n.hash;
  c.record.created_unix = clock_->UnixSeconds();
  c.record.expires_unix = ttl_s > 0 ? c.record.created_unix + ttl_s : 0;
  c.record.description = description;
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Put("tokens", n.id, EncodeToken(c.record)));
  tokens_[n.id] = c.record;
  return c;
}

std::vector<TokenRecord> TokenStore::List(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, t] : tokens_) {
    if (t.id == kBootstrapId) continue;
    if (tenant.empty() || t.tenant == tenant) out.push_back(t);
  }
  std::stable_sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return a.created_unix < b.created_unix;
  });
  return out;
}

absl::StatusOr<TokenRecord> TokenStore::Revoke(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end() || it->second.id == kBootstrapId) {
    return absl::NotFoundError(absl::StrCat("no token '", id.substr(0, 64), "'"));
  }
  TokenRecord t = it->second;
  t.revoked = true;
  RETURN_IF_ERROR(Put("tokens", id, EncodeToken(t)));
  it->second = t;
  return t;
}

absl::StatusOr<Identity> TokenStore::Authenticate(const std::string& token) const {
  absl::StatusOr<security::ParsedToken> p = security::ParseToken(token);
  if (!p.ok()) return Unauthenticated(absl::StrCat("bad bearer token: ", p.status().message()));
  absl::MutexLock lock(&mu_);
  auto it = tokens_.find(p->id);
  if (it == tokens_.end() ||
      !security::DigestsEqual(security::HashSecret(it->second.salt, p->secret), it->second.hash)) {
    return Unauthenticated(absl::StrCat("token ", p->id, " is not known"));
  }
  const TokenRecord& t = it->second;
  if (t.revoked) return Unauthenticated(absl::StrCat("token ", t.id, " was revoked"));
  if (t.expires_unix > 0 && clock_->UnixSeconds() >= t.expires_unix) {
    return Unauthenticated(absl::StrCat("token ", t.id, " expired at unix time ", t.expires_unix));
  }
  Identity id;
  id.role = t.role;
  id.tenant = t.tenant;
  id.token_id = t.id;
  return id;
}

int32_t TokenStore::MaxPriority(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = policies_.find(tenant);
  return it == policies_.end() ? default_max_priority_ : it->second.max_priority;
}

absl::Status TokenStore::SetMaxPriority(const std::string& tenant, int32_t max_priority) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  absl::MutexLock lock(&mu_);
  TenantPolicy p = policies_.count(tenant) ? policies_[tenant] : TenantPolicy{tenant};
  p.max_priority = max_priority;
  RETURN_IF_ERROR(Put("tenant_policies", tenant, EncodeTenantPolicy(p)));
  policies_[tenant] = p;
  return absl::OkStatus();
}

absl::Status TokenStore::SetPolicy(const TenantPolicy& policy) {
  RETURN_IF_ERROR(ValidateName("tenant", policy.tenant));
  if (policy.max_volume_bytes < 0 || policy.max_volumes < 0) {
    return absl::InvalidArgumentError("max_volume_bytes, max_volumes: must be >= 0 (0: the coordinator's default)");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Put("tenant_policies", policy.tenant, EncodeTenantPolicy(policy)));
  policies_[policy.tenant] = policy;
  return absl::OkStatus();
}

std::vector<TenantPolicy> TokenStore::PolicyList() const {
  absl::MutexLock lock(&mu_);
  std::vector<TenantPolicy> out;
  for (const auto& [tenant, p] : policies_) out.push_back(p);
  return out;
}

TenantPolicy TokenStore::PolicyOf(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = policies_.find(tenant);
  return it == policies_.end() ? TenantPolicy{tenant, default_max_priority_} : it->second;
}

}  // namespace athanor::coord
