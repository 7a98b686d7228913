// Who is calling: the identity a request proves (a bearer token, an agent
// certificate, or both), never what the request says about itself; and the
// records security keeps (tokens, tenants' policies and credentials).
#pragma once

#include <cstdint>
#include <string>

namespace athanor::coord {

enum class Role { kNone, kUser, kAdmin };

const char* RoleName(Role r);
// "user" / "admin"; false for anything else.
bool ParseRole(const std::string& text, Role* out);

struct Identity {
  Role role = Role::kNone;  // from a bearer token
  std::string tenant;       // the token's tenant
  std::string token_id;     // the token's public id ("bootstrap" for the admin file's)
  std::string node;         // from a verified agent certificate; empty if none
  bool insecure = false;    // --insecure: no authentication, every call allowed

  // For logs: "user alice (token 0a1b...)", "agent node-a", "insecure".
  std::string Describe() const;
};

// A token's record as kept (the secret's salted hash, never the secret).
struct TokenRecord {
  std::string id;
  std::string tenant;
  Role role = Role::kUser;
  std::string salt;
  std::string hash;
  int64_t created_unix = 0;
  int64_t expires_unix = 0;  // 0: never
  bool revoked = false;
  std::string description;
};

// A tenant's object-store credentials (secret_store.h keeps them sealed).
struct StoreCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // may be empty
};

// A tenant's submission limit (token_store.h).
struct TenantPolicy {
  std::string tenant;
  int32_t max_priority = 0;
  // Volumes: the sum of size limits and the count it may hold (0: the
  // coordinator's --volume-quota-bytes / --volume-quota-count).
  int64_t max_volume_bytes = 0;
  int32_t max_volumes = 0;
};

}  // namespace athanor::coord
