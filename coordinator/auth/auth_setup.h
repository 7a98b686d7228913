// The coordinator's security, built once from its flags: TLS material, the
// token store, the authorizer, the submission guard and the Security service.
// Secure by default: without --tls-dir the coordinator refuses to start,
// unless --insecure is given AND it listens on loopback only.
// Owns everything it hands out pointers to; outlives the gRPC server.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/http_server.h"
#include "common/options.h"
#include "coordinator/auth/auth_policy.h"
#include "coordinator/auth/auth_service.h"
#include "coordinator/auth/auth_submit.h"
#include "coordinator/auth/secret_store.h"
#include "coordinator/auth/token_store.h"
#include "security/tls.h"

namespace athanor::coord {

// What the gRPC services check callers with. Not owned: CoordinatorSecurity
// owns them and outlives the services.
struct ServiceSecurity {
  const Authorizer* auth = nullptr;
  SubmissionGuard* submissions = nullptr;
  const security::TlsMaterial* agent_tls = nullptr;  // null: plain channels (--insecure)
};

struct SecurityFlags {
  std::string tls_dir;
  bool insecure = false;
  int32_t default_max_priority = 0;
  double submit_rate = 10;
  double submit_burst = 50;
  int32_t max_pending_per_tenant = 1000;
  std::vector<std::string> allowed_endpoints;
  std::string secrets_key_file;  // empty: TLS_DIR/secrets.key when present
};

void AddSecurityFlags(po::options_description& desc, SecurityFlags* flags);

class CoordinatorSecurity {
 public:
  // InvalidArgument / FailedPrecondition naming the flag or file at fault.
  static absl::StatusOr<std::unique_ptr<CoordinatorSecurity>> Create(const SecurityFlags& flags,
                                                                     const std::string& listen,
                                                                     const std::string& state_path,
                                                                     const Clock* clock);

  std::shared_ptr<grpc::ServerCredentials> server_credentials() const;
  ServiceSecurity service_security();
  const Authorizer* authorizer() const { return authorizer_.get(); }
  const TokenStore* tokens() const { return tokens_.get(); }  // tenants' policies
  SecurityService* security_service() { return service_.get(); }
  const SecretStore* secrets() const { return secrets_.get(); }
  // For the dashboard and /metrics: pages and static assets are open (they
  // hold no data); everything else needs a bearer token, which names the
  // caller's tenant and role. Open to everyone with --insecure.
  HttpAuthenticator http_authenticator() const;
  // The coordinator's certificate and key; null with --insecure.
  const security::TlsMaterial* tls() const { return tls_ ? &*tls_ : nullptr; }

 private:
  CoordinatorSecurity() = default;

  std::optional<security::TlsMaterial> tls_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<SecretStore> secrets_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<SubmissionGuard> submissions_;
  std::unique_ptr<SecurityService> service_;
};

}  // namespace athanor::coord
