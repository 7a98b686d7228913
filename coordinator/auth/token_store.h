// Bearer tokens and per-tenant limits, kept in the coordinator's state
// database (tables `tokens` and `tenant_policies`, one protobuf JSON row
// each, auth_rows.h) through a connection of its own, and cached in memory.
// Token rows of releases up to 0ca114a are rewritten once, at Open
// (legacy_auth_rows.h).
//
// Token writes are rare admin calls: each is one synchronous transaction
// (WAL, synchronous=FULL) before the cache changes, so a token that was
// shown to an admin survives a crash. Reads (every RPC authenticates) touch
// only the cache. Thread-safe: one mutex; no callbacks.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/auth/auth_types.h"

struct sqlite3;

namespace athanor::coord {

class TokenStore {
 public:
  // Opens (creating the tables in) the database at `path`. `clock` is not
  // owned and outlives the store. `default_max_priority` caps tenants
  // without a policy.
  static absl::StatusOr<std::unique_ptr<TokenStore>> Open(const std::string& path,
                                                          const Clock* clock,
                                                          int32_t default_max_priority);
  ~TokenStore();

  // Accepts `token` (the bootstrap admin file's) as an admin of tenant
  // "admin" for this process's life; it is never written to the database.
  absl::Status AddBootstrapAdmin(const std::string& token);

  struct Created {
    std::string token;  // the bearer token: returned once
    TokenRecord record;
  };
  // InvalidArgument for an empty/oversized tenant or a negative ttl.
  absl::StatusOr<Created> Create(const std::string& tenant, Role role, int64_t ttl_s,
                                 const std::string& description);
  // Every token (of `tenant` unless empty), newest last; hashes included
  // (callers drop them before answering).
  std::vector<TokenRecord> List(const std::string& tenant) const;
  // NotFound for an unknown id.
  absl::StatusOr<TokenRecord> Revoke(const std::string& id);

  // The identity a bearer token proves. Unauthenticated naming why (malformed,
  // unknown, revoked, expired) without echoing the token.
  absl::StatusOr<Identity> Authenticate(const std::string& token) const;

  int32_t MaxPriority(const std::string& tenant) const;
  // Per-tenant maximum priority; persisted (the policy's other fields kept).
  absl::Status SetMaxPriority(const std::string& tenant, int32_t max_priority);
  // A tenant's whole policy, replaced; persisted. InvalidArgument for a bad
  // tenant or a negative volume quota.
  absl::Status SetPolicy(const TenantPolicy& policy);
  // Every tenant's policy, by tenant; one tenant's (zeros when it has none).
  std::vector<TenantPolicy> PolicyList() const;
  TenantPolicy PolicyOf(const std::string& tenant) const;

 private:
  TokenStore(sqlite3* db, const Clock* clock, int32_t default_max_priority);
  absl::Status Exec(const std::string& sql);
  absl::Status Load();
  absl::Status Put(const char* table, const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const int32_t default_max_priority_;
  mutable absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);  // owned
  std::map<std::string, TokenRecord> tokens_ ABSL_GUARDED_BY(mu_);  // by id
  std::map<std::string, TenantPolicy> policies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace athanor::coord
