#include "coordinator/auth/auth_setup.h"

#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/uri.h"
#include "security/private_file.h"

namespace athanor::coord {

void AddSecurityFlags(po::options_description& desc, SecurityFlags* f) {
  desc.add_options()
      ("tls-dir", po::value(&f->tls_dir)->default_value(""),
       "cluster CA folder (athanor admin ca init): ca.crt, coordinator.crt, coordinator.key, and "
       "admin.token (the bootstrap admin token) when present")
      ("insecure", po::bool_switch(&f->insecure),
       "no TLS and no authentication; allowed only with a loopback --listen address")
      ("default-max-priority", po::value(&f->default_max_priority)->default_value(0),
       "highest priority a user may submit at, for tenants an admin gave no maximum")
      ("submit-rate", po::value(&f->submit_rate)->default_value(10),
       "submissions per second per user token (token bucket)")
      ("submit-burst", po::value(&f->submit_burst)->default_value(50),
       "submissions a user token may make at once")
      ("max-pending-per-tenant", po::value(&f->max_pending_per_tenant)->default_value(1000),
       "pending jobs a tenant may have queued by its users' submissions; past it a submission is "
       "refused (0: no cap; admins are not limited)")
      ("allow-store-endpoint", po::value(&f->allowed_endpoints)->composing(),
       "an object-store endpoint (e.g. https://minio.internal:9000) that jobs' s3:// URIs may name "
       "(repeatable); others are refused")
      ("secrets-key-file", po::value(&f->secrets_key_file)->default_value(""),
       "key (64 hex digits, mode 0600) sealing tenants' store credentials in the state database "
       "(default: TLS_DIR/secrets.key when present)");
}

absl::StatusOr<std::unique_ptr<CoordinatorSecurity>> CoordinatorSecurity::Create(
    const SecurityFlags& flags, const std::string& listen, const std::string& state_path,
    const Clock* clock) {
  std::unique_ptr<CoordinatorSecurity> s(new CoordinatorSecurity());
  if (flags.insecure) {
    if (!flags.tls_dir.empty()) {
      return absl::InvalidArgumentError("--insecure and --tls-dir: choose one");
    }
    if (!security::IsLoopbackListen(listen)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--insecure: refused on ", listen,
          ", which is not a loopback address; serve other hosts with --tls-dir"));
    }
    ATHANOR_LOG(WARNING) << "--insecure: no TLS and no authentication (loopback only)";
  } else if (flags.tls_dir.empty()) {
    return absl::FailedPreconditionError(
        "no TLS material: pass --tls-dir DIR (made by `athanor admin ca init --dir DIR`), or "
        "--insecure with a loopback --listen address");
  }
  if (flags.submit_rate <= 0 || flags.submit_burst < 1) {
    return absl::InvalidArgumentError("--submit-rate must be > 0 and --submit-burst >= 1");
  }
  if (flags.max_pending_per_tenant < 0) {
    return absl::InvalidArgumentError("--max-pending-per-tenant must be >= 0");
  }
  ASSIGN_OR_RETURN(s->tokens_, TokenStore::Open(state_path, clock, flags.default_max_priority));
  if (!flags.insecure) {
    absl::StatusOr<security::TlsMaterial> tls =
        security::LoadTlsMaterial(flags.tls_dir, "coordinator");
    if (!tls.ok()) return absl::FailedPreconditionError(absl::StrCat("--tls-dir: ", tls.status().message()));
    s->tls_ = std::move(*tls);
    std::string admin_path = flags.tls_dir + "/admin.token";
    absl::StatusOr<std::string> admin = security::ReadPrivateFile(admin_path);
    if (admin.ok()) {
      RETURN_IF_ERROR(s->tokens_->AddBootstrapAdmin(std::string(absl::StripAsciiWhitespace(*admin))));
    } else if (admin.status().code() != absl::StatusCode::kNotFound) {
      return absl::FailedPreconditionError(absl::StrCat("--tls-dir: ", admin.status().message()));
    }
  }
  std::string key_file = flags.secrets_key_file;
  struct stat st;
  if (key_file.empty() && !flags.tls_dir.empty() && stat((flags.tls_dir + "/secrets.key").c_str(), &st) == 0) {
    key_file = flags.tls_dir + "/secrets.key";
  }
  std::optional<security::SecretBox> box;
  if (!key_file.empty()) {
    absl::StatusOr<security::SecretBox> b = security::SecretBox::FromKeyFile(key_file);
    if (!b.ok()) return absl::FailedPreconditionError(absl::StrCat("secrets key: ", b.status().message()));
    box = std::move(*b);
  }
  ASSIGN_OR_RETURN(s->secrets_, SecretStore::Open(state_path, std::move(box)));
  s->authorizer_ = std::make_unique<Authorizer>(s->tokens_.get(), flags.insecure);
  SubmitLimits limits;
  limits.rate_per_s = flags.submit_rate;
  limits.burst = flags.submit_burst;
  limits.max_pending = flags.max_pending_per_tenant;
  for (std::string e : flags.allowed_endpoints) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    limits.allowed_endpoints.push_back(e);
  }
  s->submissions_ = std::make_unique<SubmissionGuard>(s->tokens_.get(), clock, std::move(limits));
  s->service_ =
      std::make_unique<SecurityService>(s->authorizer_.get(), s->tokens_.get(), s->secrets_.get());
  return s;
}

std::shared_ptr<grpc::ServerCredentials> CoordinatorSecurity::server_credentials() const {
  if (!tls_) return grpc::InsecureServerCredentials();
  return security::ServerCredentials(*tls_, /*require_client_cert=*/false);
}

ServiceSecurity CoordinatorSecurity::service_security() {
  ServiceSecurity out;
  out.auth = authorizer_.get();
  out.submissions = submissions_.get();
  out.agent_tls = tls_ ? &*tls_ : nullptr;
  return out;
}

HttpAuthenticator CoordinatorSecurity::http_authenticator() const {
  if (!tls_) return OpenAuthenticator();
  const TokenStore* tokens = tokens_.get();
  return [tokens](const HttpRequest& req) -> absl::StatusOr<HttpCaller> {
    // The pages are static: their figures come from /api/..., which
    // authenticate (and the RPCs behind them authorise).
    if (req.path == "/" || req.path == "/index.html" || req.path == "/job" ||
        req.path == "/billing" || absl::StartsWith(req.path, "/static/")) {
      return HttpCaller{"", "anonymous"};
    }
    constexpr absl::string_view kBearer = "Bearer ";
    if (!absl::StartsWith(req.authorization, kBearer)) {
      return absl::UnauthenticatedError("send 'Authorization: Bearer <token>' (athanor admin token create)");
    }
    absl::StatusOr<Identity> id = tokens->Authenticate(req.authorization.substr(kBearer.size()));
    if (!id.ok()) return id.status();
    return HttpCaller{id->role == Role::kAdmin ? "" : id->tenant, RoleName(id->role)};
  };
}

}  // namespace athanor::coord
