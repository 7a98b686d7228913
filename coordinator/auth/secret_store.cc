#include "coordinator/auth/secret_store.h"

#include <sqlite3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/uri.h"
#include "coordinator/auth/auth_rows.h"
#include "coordinator/model/validation.h"

namespace athanor::coord {
namespace {

absl::Status Sql(sqlite3* db, const std::string& what) {
  return absl::UnavailableError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SecretStore>> SecretStore::Open(const std::string& path,
                                                               std::optional<security::SecretBox> box) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    absl::Status s = Sql(db, "open " + path);
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<SecretStore> store(new SecretStore(db, std::move(box)));
  if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS tenant_secrets (tenant TEXT PRIMARY KEY, sealed TEXT NOT NULL)",
                   nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Sql(db, "create tenant_secrets");
  }
  RETURN_IF_ERROR(store->Load());
  return store;
}

SecretStore::~SecretStore() { sqlite3_close(db_); }

absl::Status SecretStore::Load() {
  absl::MutexLock lock(&mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT tenant, sealed FROM tenant_secrets", -1, &st, nullptr) != SQLITE_OK) {
    return Sql(db_, "read tenant_secrets");
  }
  absl::Status status;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string tenant(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    std::string sealed(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
    if (!box_) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "the state database holds sealed credentials of tenant '", tenant, "' but no secrets key was given"));
      break;
    }
    absl::StatusOr<std::string> plain = box_->Open(sealed, tenant);
    if (!plain.ok()) {
      status = absl::DataLossError(absl::StrCat("credentials of tenant '", tenant, "': ", plain.status().message()));
      break;
    }
    // Releases up to 0ca114a sealed hand JSON with the same field names: it
    // reads here as it is.
    absl::StatusOr<StoreCredentials> creds = DecodeCredentials(*plain);
    if (!creds.ok()) {
      status = absl::DataLossError(absl::StrCat("credentials of tenant '", tenant, "': ", creds.status().message()));
      break;
    }
    creds_[tenant] = *std::move(creds);
  }
  sqlite3_finalize(st);
  return status;
}

absl::Status SecretStore::Set(const std::string& tenant, const StoreCredentials& c) {
  RETURN_IF_ERROR(ValidateName("tenant", tenant));
  if (!box_) {
    return absl::FailedPreconditionError("no secrets key: start the coordinator with --tls-dir holding secrets.key");
  }
  if (c.access_key.size() > 1024 || c.secret_key.size() > 1024 || c.session_token.size() > 8192) {
    return absl::InvalidArgumentError("credentials: access key and secret at most 1 KiB, session token 8 KiB");
  }
  if (!c.access_key.empty() && c.secret_key.empty()) {
    return absl::InvalidArgumentError("credentials: a secret key is required with an access key");
  }
  absl::MutexLock lock(&mu_);
  sqlite3_stmt* st = nullptr;
  std::string sealed;
  if (c.access_key.empty()) {
    sqlite3_prepare_v2(db_, "DELETE FROM tenant_secrets WHERE tenant = ?", -1, &st, nullptr);
  } else {
    ASSIGN_OR_RETURN(sealed, box_->Seal(EncodeCredentials(c), tenant));
    sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO tenant_secrets VALUES (?, ?)", -1, &st, nullptr);
    sqlite3_bind_text(st, 2, sealed.data(), static_cast<int>(sealed.size()), SQLITE_TRANSIENT);
  }
  if (st == nullptr) return Sql(db_, "prepare");
  sqlite3_bind_text(st, 1, tenant.data(), static_cast<int>(tenant.size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Sql(db_, "write tenant_secrets");
  if (c.access_key.empty()) {
    creds_.erase(tenant);
  } else {
    creds_[tenant] = c;
  }
  return absl::OkStatus();
}

std::optional<StoreCredentials> SecretStore::Get(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = creds_.find(tenant);
  if (it == creds_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> SecretStore::Tenants() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [tenant, c] : creds_) out.push_back(tenant);
  return out;
}

std::map<std::string, std::string> SecretStore::RankEnv(const std::string& tenant) const {
  std::map<std::string, std::string> env;
  std::optional<StoreCredentials> c = Get(tenant);
  if (!c) return env;
  env["AWS_ACCESS_KEY_ID"] = c->access_key;
  env["AWS_SECRET_ACCESS_KEY"] = c->secret_key;
  if (!c->session_token.empty()) env["AWS_SESSION_TOKEN"] = c->session_token;
  return env;
}

std::optional<std::string> SecretStore::UriForTenant(const std::string& tenant, const std::string& uri) const {
  if (!absl::StartsWith(uri, "s3://")) return uri;
  std::optional<StoreCredentials> c = Get(tenant);
  absl::StatusOr<Uri> parsed = ParseUri(uri);
  if (!c || !parsed.ok()) return std::nullopt;
  parsed->query["access_key"] = c->access_key;
  parsed->query["secret_key"] = c->secret_key;
  if (!c->session_token.empty()) parsed->query["session_token"] = c->session_token;
  return parsed->ToString();
}

}  // namespace athanor::coord
