// Tenants' object-store credentials, set by an admin, kept in the state
// database (table `tenant_secrets`) sealed with AES-256-GCM under the
// secrets key (security/secret_box.h; the tenant is the associated data; the
// plaintext is auth_rows.h's EncodeCredentials), and
// held decrypted in memory only. They leave the coordinator in exactly two
// ways: in the env of that tenant's ranks (heartbeat replies, over mutual
// TLS), and in the store URI the checkpoint poller opens for that tenant's
// jobs. No RPC returns them and nothing logs them.
//
// Thread-safe: one mutex; writes are one synchronous SQLite statement.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/auth_types.h"
#include "security/secret_box.h"

struct sqlite3;

namespace athanor::coord {

class SecretStore {
 public:
  // `box` empty: no secrets key; Set fails and stored rows are not opened.
  static absl::StatusOr<std::unique_ptr<SecretStore>> Open(const std::string& path,
                                                           std::optional<security::SecretBox> box);
  ~SecretStore();

  // Empty access_key: removes the tenant's credentials. FailedPrecondition
  // without a secrets key.
  absl::Status Set(const std::string& tenant, const StoreCredentials& creds);
  std::optional<StoreCredentials> Get(const std::string& tenant) const;
  std::vector<std::string> Tenants() const;

  // The env a rank of `tenant` gets (AWS_ACCESS_KEY_ID, ...); empty if none.
  std::map<std::string, std::string> RankEnv(const std::string& tenant) const;
  // `uri` with the tenant's credentials for the coordinator's own reads:
  // s3 URIs get them as query parameters (in memory only); an s3 URI of a
  // tenant without credentials gives nullopt (never the coordinator's own).
  std::optional<std::string> UriForTenant(const std::string& tenant, const std::string& uri) const;

 private:
  SecretStore(sqlite3* db, std::optional<security::SecretBox> box) : db_(db), box_(std::move(box)) {}
  absl::Status Load();

  mutable absl::Mutex mu_;
  sqlite3* const db_;  // owned; used under mu_
  const std::optional<security::SecretBox> box_;
  std::map<std::string, StoreCredentials> creds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::coord
