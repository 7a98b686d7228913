// THE authorisation table: for every RPC the coordinator serves, which
// callers may make it (users, admins, agents) and which ownership rule
// applies. Every handler of every service (Coordinator, NodeAgent, Security,
// Billing, callback API included) starts with Authorizer::Check(ctx, "<Service>.<Rpc>")
// and, where the rule has an owner, calls CheckOwner once it knows the
// target; nothing else decides who may do what.
//
// Extending: a new RPC is one line in kRules (auth_policy.cc). An RPC that is
// not in the table is DENIED (PermissionDenied "not in the authorisation
// table"), whoever calls it; auth_policy_test fails for any method of the
// proto's services that lacks a line, so a new RPC cannot ship unlisted.
//
// Identity (auth_types.h) comes from the call, never from the request: a
// bearer token ("authorization: Bearer ath_...") for users and admins, the
// verified agent certificate (subjectAltName "<node>.node.athanor") for
// agents. With --insecure (loopback only) nothing is checked.
//
// Thread-safe: the table is constant; the token store is not owned and
// outlives the authorizer.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "coordinator/auth/auth_types.h"
#include "coordinator/auth/token_store.h"

namespace athanor::coord {

enum class Owner {
  kNone,           // no ownership: whoever the roles allow
  kTenant,         // users: only their own tenant's jobs / records (admins: any)
  kOwnNode,        // agents: only their own node's records
  kJobOnOwnNode,   // agents: only jobs that have ranks on their node
};

struct AuthRule {
  absl::string_view method;  // "<Service>.<Rpc>"
  bool user;
  bool admin;
  bool agent;
  Owner owner;
};

// The rule for `method`, or nullptr (denied).
const AuthRule* FindAuthRule(absl::string_view method);
// Every rule, for tests and docs.
const AuthRule* AuthRulesBegin();
const AuthRule* AuthRulesEnd();

// What an ownership rule is checked against.
struct AuthTarget {
  std::string tenant;             // kTenant: the record's tenant
  std::string node;               // kOwnNode: the node the request names
  std::vector<std::string> nodes; // kJobOnOwnNode: the job's nodes
};

class Authorizer {
 public:
  // `tokens` may be null only when `insecure`.
  Authorizer(const TokenStore* tokens, bool insecure) : tokens_(tokens), insecure_(insecure) {}

  // Authenticates the call and checks the table's roles for `method`.
  // Unauthenticated (no/invalid/expired/revoked credentials) or
  // PermissionDenied (role, or `method` not in the table).
  absl::StatusOr<Identity> Check(const grpc::ServerContextBase& ctx, absl::string_view method) const;

  // The ownership rule of `method` for `who` against `target`; PermissionDenied.
  absl::Status CheckOwner(const Identity& who, absl::string_view method,
                          const AuthTarget& target) const;

  // The identity alone (for tests): token and certificate, no table.
  absl::StatusOr<Identity> Authenticate(const grpc::ServerContextBase& ctx) const;

  bool insecure() const { return insecure_; }

 private:
  const TokenStore* const tokens_;
  const bool insecure_;
};

}  // namespace athanor::coord
