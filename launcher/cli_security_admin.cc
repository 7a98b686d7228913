// `athanor admin`'s security groups: the cluster CA, bearer tokens, tenants'
// limits and their store credentials. Two levels below `admin`: a group, then a verb.
//
//   athanor admin ca init --dir DIR              CA, coordinator certificate, admin.token
//   athanor admin ca agent --dir DIR --node N    a node's agent certificate
//   athanor admin ca coordinator --dir DIR       re-issue the coordinator's certificate
//   athanor admin token create --tenant T [--role user|admin] [--ttl D] [--description S]
//   athanor admin token list [--tenant T] [--json]
//   athanor admin token revoke ID
//   athanor admin tenant set T [--max-priority P] [--max-volume-bytes S] [--max-volumes N] [--json]
//   athanor admin tenant list [--json]
//   athanor admin credentials set TENANT --file F   a tenant's store credentials (F: 0600,
//                                                   lines access_key=, secret_key=, session_token=)
//   athanor admin credentials clear TENANT | list
//
// `ca` works on files only; the others call the coordinator's Security
// service (admins only). A new token is printed once, alone on stdout.
// `--help` at each level describes it without calling anyone; the tree and
// its help are cli_admin_tree.h's.
#include <iostream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/cli_admin_tree.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"
#include "launcher/cli_volume.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"

namespace athanor::cli {
namespace {

int FileError(const std::string& what, const absl::Status& s) {
  std::cerr << "athanor " << what << ": " << s.message() << "\n";
  return kExitRpcError;
}

// ---------------------------------------------------------------- ca

int CaVerb(const std::vector<std::string>& args, const Subcommand& verb) {
  std::string dir, node;
  po::options_description desc("options");
  desc.add_options()("dir", po::value(&dir)->required(), "the cluster CA folder");
  if (verb.name == "agent") desc.add_options()("node", po::value(&node)->required(), "the node the certificate names");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("ca", verb), &cmd); rc >= 0) return rc;
  absl::Status s;
  if (verb.name == "init") {
    s = security::InitClusterCa(dir);
    if (s.ok()) {
      std::cout << "cluster CA in " << dir << ": ca.crt, coordinator.crt/.key, admin.token "
                << "(keep ca.key and admin.token private)\n";
    }
  } else if (verb.name == "agent") {
    s = security::IssueAgentCertificate(dir, node);
    if (s.ok()) std::cout << "agent certificate for node " << node << " in " << dir << "/agent-" << node << ".crt\n";
  } else {
    s = security::IssueCoordinatorCertificate(dir);
    if (s.ok()) std::cout << "coordinator certificate re-issued in " << dir << "/coordinator.crt\n";
  }
  return s.ok() ? kExitOk : FileError(args[0], s);
}

const Subcommand kCaInit{"init", "--dir DIR",
                         "make the cluster CA, the coordinator's certificate and a bootstrap admin token"};
const Subcommand kCaAgent{"agent", "--dir DIR --node NAME", "issue a node's agent certificate"};
const Subcommand kCaCoordinator{"coordinator", "--dir DIR", "re-issue the coordinator's certificate"};

int RunCaInit(CliContext&, const std::vector<std::string>& args) { return CaVerb(args, kCaInit); }
int RunCaAgent(CliContext&, const std::vector<std::string>& args) { return CaVerb(args, kCaAgent); }
int RunCaCoordinator(CliContext&, const std::vector<std::string>& args) {
  return CaVerb(args, kCaCoordinator);
}

// ---------------------------------------------------------------- token

const Subcommand kTokenCreate{"create", "--tenant T [--role user|admin] [--ttl D] [--description S]",
                              "make a bearer token; it is printed once, alone on stdout"};
const Subcommand kTokenList{"list", "[--tenant T] [--json]", "list tokens (never their secrets)"};
const Subcommand kTokenRevoke{"revoke", "ID", "revoke a token at once"};

void PrintToken(const rpc::TokenInfo& t) {
  std::cout << t.id() << "  " << t.tenant() << "  " << t.role() << "  created " << FormatUnixTime(t.created_unix())
            << "  expires " << FormatUnixTime(t.expires_unix()) << (t.revoked() ? "  REVOKED" : "")
            << (t.description().empty() ? "" : "  " + t.description()) << "\n";
}

int RunTokenCreate(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, role, ttl, description;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant)->required(), "the token's tenant")
      ("role", po::value(&role)->default_value("user"), "user or admin")
      ("ttl", po::value(&ttl), "lifetime, e.g. 30m, 12h, 90d (default: no expiry)")
      ("description", po::value(&description), "a note shown by `token list`");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("token", kTokenCreate), &cmd); rc >= 0) return rc;
  rpc::CreateTokenRequest req;
  req.set_tenant(tenant);
  req.set_role(role);
  req.set_description(description);
  if (!ttl.empty()) {
    std::optional<int64_t> s = ParseDurationSeconds(ttl);
    if (!s || *s <= 0) return UsageError(args[0], "--ttl expects a duration like 30m, 12h or 90d");
    req.set_ttl_s(*s);
  }
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::CreateTokenResponse resp;
  grpc::Status s = stub->CreateToken(&c, req, &resp);
  if (!s.ok()) return RpcError(args[0], ctx, s);
  std::cout << resp.token() << "\n";
  std::cerr << "token " << resp.info().id() << " for tenant " << resp.info().tenant() << " ("
            << resp.info().role() << ", expires " << FormatUnixTime(resp.info().expires_unix())
            << "): shown once; store it mode 0600\n";
  return kExitOk;
}

int RunTokenList(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant), "only this tenant's tokens")
      ("json", po::bool_switch(&json), "print the ListTokensResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("token", kTokenList), &cmd); rc >= 0) return rc;
  rpc::ListTokensRequest req;
  req.set_tenant(tenant);
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTokensResponse resp;
  grpc::Status s = stub->ListTokens(&c, req, &resp);
  if (!s.ok()) return RpcError(args[0], ctx, s);
  if (json) {
    std::cout << ToJson(resp);
  } else {
    for (const rpc::TokenInfo& t : resp.tokens()) PrintToken(t);
  }
  return kExitOk;
}

int RunTokenRevoke(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id;
  po::options_description desc("options");
  desc.add_options()("id", po::value(&id)->required(), "the token id (as `token list` shows it)");
  po::positional_options_description pos = FirstOperand("id");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("token", kTokenRevoke), &cmd, &pos); rc >= 0) return rc;
  rpc::RevokeTokenRequest req;
  req.set_id(id);
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::RevokeTokenResponse resp;
  grpc::Status s = stub->RevokeToken(&c, req, &resp);
  if (!s.ok()) return RpcError(args[0], ctx, s);
  PrintToken(resp.info());
  return kExitOk;
}

// ---------------------------------------------------------------- tenant

const Subcommand kTenantSet{"set", "TENANT [--max-priority P] [--max-volume-bytes S] [--max-volumes N] [--json]",
                            "cap the priority a tenant's users may submit at, and its volumes"};
const Subcommand kTenantList{"list", "[--json]", "list tenants' priority caps and volume quotas"};

int PrintPolicies(const std::string& what, const CliContext& ctx, const grpc::Status& s,
                  const rpc::ListTenantPoliciesResponse& resp, bool json) {
  if (!s.ok()) return RpcError(what, ctx, s);
  if (json) {
    std::cout << ToJson(resp);
  } else {
    for (const rpc::TenantPolicy& p : resp.policies()) {
      std::cout << p.tenant() << "  max priority " << p.max_priority() << "  volumes "
                << (p.max_volume_bytes() > 0 ? FormatSize(p.max_volume_bytes()) : std::string("default")) << ", "
                << (p.max_volumes() > 0 ? std::to_string(p.max_volumes()) : std::string("default")) << " at most\n";
    }
  }
  return kExitOk;
}

int RunTenantSet(CliContext& ctx, const std::vector<std::string>& args) {
  std::string tenant, max_volume_bytes;
  std::optional<int32_t> max_priority, max_volumes;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()
      ("tenant", po::value(&tenant)->required(), "the tenant")
      ("max-priority", po::value<int32_t>()->notifier([&](int32_t v) { max_priority = v; }),
       "highest priority its users may submit at (required for a tenant without a policy)")
      ("max-volume-bytes", po::value(&max_volume_bytes),
       "the sum of its volumes' sizes: bytes, or with K, M, G, T (0: the coordinator's --volume-quota-bytes)")
      ("max-volumes", po::value<int32_t>()->notifier([&](int32_t v) { max_volumes = v; }),
       "how many volumes it may hold (0: the coordinator's --volume-quota-count)")
      ("json", po::bool_switch(&json), "print the ListTenantPoliciesResponse as JSON");
  po::positional_options_description pos = FirstOperand("tenant");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("tenant", kTenantSet), &cmd, &pos); rc >= 0) return rc;
  rpc::SetTenantPolicyRequest req;
  rpc::TenantPolicy* policy = req.mutable_policy();
  auto stub = rpc::Security::NewStub(ctx.channel);
  {  // The policy replaces the tenant's whole one: start from what it is.
    grpc::ClientContext c;
    PrepareCall(ctx, &c);
    rpc::ListTenantPoliciesResponse current;
    grpc::Status s = stub->ListTenantPolicies(&c, rpc::ListTenantPoliciesRequest(), &current);
    if (!s.ok()) return RpcError(args[0], ctx, s);
    bool found = false;
    for (const rpc::TenantPolicy& p : current.policies()) {
      if (p.tenant() == tenant) {
        *policy = p;
        found = true;
      }
    }
    if (!found && !max_priority) return UsageError(args[0], "--max-priority: required for a tenant without a policy");
  }
  policy->set_tenant(tenant);
  if (max_priority) policy->set_max_priority(*max_priority);
  if (max_volumes) {
    if (*max_volumes < 0) return UsageError(args[0], "--max-volumes: must be 0 or more");
    policy->set_max_volumes(*max_volumes);
  }
  if (!max_volume_bytes.empty()) {
    int64_t bytes = 0;
    if (max_volume_bytes != "0") {
      absl::StatusOr<int64_t> parsed = ParseSize("--max-volume-bytes", max_volume_bytes);
      if (!parsed.ok()) return UsageError(args[0], std::string(parsed.status().message()));
      bytes = *parsed;
    }
    policy->set_max_volume_bytes(bytes);
  }
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantPoliciesResponse resp;
  grpc::Status s = stub->SetTenantPolicy(&c, req, &resp);
  return PrintPolicies(args[0], ctx, s, resp, json);
}

int RunTenantList(CliContext& ctx, const std::vector<std::string>& args) {
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("json", po::bool_switch(&json), "print the ListTenantPoliciesResponse as JSON");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("tenant", kTenantList), &cmd); rc >= 0) return rc;
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantPoliciesResponse resp;
  grpc::Status s = stub->ListTenantPolicies(&c, rpc::ListTenantPoliciesRequest(), &resp);
  return PrintPolicies(args[0], ctx, s, resp, json);
}

// ---------------------------------------------------------------- credentials

const Subcommand kCredentialsSet{
    "set", "TENANT --file F",
    "store a tenant's object-store credentials (F: mode 0600, lines access_key=..., "
    "secret_key=..., session_token=...)"};
const Subcommand kCredentialsClear{"clear", "TENANT", "forget a tenant's credentials"};
const Subcommand kCredentialsList{"list", "", "list the tenants that have credentials"};

// Reads `file`'s key=value lines into *creds.
absl::Status ReadCredentialsFile(const std::string& file, rpc::SetTenantCredentialsRequest* req) {
  absl::StatusOr<std::string> text = security::ReadPrivateFile(file);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    std::string value(absl::StripAsciiWhitespace(kv.second));
    if (key == "access_key") {
      req->mutable_credentials()->set_access_key(value);
    } else if (key == "secret_key") {
      req->mutable_credentials()->set_secret_key(value);
    } else if (key == "session_token") {
      req->mutable_credentials()->set_session_token(value);
    } else {
      return absl::InvalidArgumentError(file + ": unknown key '" + key + "'");
    }
  }
  if (req->credentials().access_key().empty() || req->credentials().secret_key().empty()) {
    return absl::InvalidArgumentError(file + ": needs access_key= and secret_key= lines");
  }
  return absl::OkStatus();
}

int PrintTenants(const std::string& what, const CliContext& ctx, const grpc::Status& s,
                 const rpc::ListTenantCredentialsResponse& resp) {
  if (!s.ok()) return RpcError(what, ctx, s);
  for (const std::string& t : resp.tenants()) std::cout << t << "\n";
  return kExitOk;
}

int SetOrClearCredentials(CliContext& ctx, const std::vector<std::string>& args, bool set) {
  std::string tenant, file;
  po::options_description desc("options");
  desc.add_options()("tenant", po::value(&tenant)->required(), "the tenant");
  if (set) {
    desc.add_options()("file", po::value(&file)->required(),
                       "key=value lines: access_key, secret_key, session_token (mode 0600; "
                       "secrets never go on a command line)");
  }
  po::positional_options_description pos = FirstOperand("tenant");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("credentials", set ? kCredentialsSet : kCredentialsClear),
                          &cmd, &pos);
      rc >= 0) {
    return rc;
  }
  rpc::SetTenantCredentialsRequest req;
  req.set_tenant(tenant);
  if (set) {
    if (absl::Status s = ReadCredentialsFile(file, &req); !s.ok()) return FileError(args[0], s);
  }
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantCredentialsResponse resp;
  grpc::Status s = stub->SetTenantCredentials(&c, req, &resp);
  return PrintTenants(args[0], ctx, s, resp);
}

int RunCredentialsSet(CliContext& ctx, const std::vector<std::string>& args) {
  return SetOrClearCredentials(ctx, args, true);
}
int RunCredentialsClear(CliContext& ctx, const std::vector<std::string>& args) {
  return SetOrClearCredentials(ctx, args, false);
}

int RunCredentialsList(CliContext& ctx, const std::vector<std::string>& args) {
  po::options_description desc("options");
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(args, desc, VerbUsage("credentials", kCredentialsList), &cmd); rc >= 0) return rc;
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantCredentialsResponse resp;
  grpc::Status s = stub->ListTenantCredentials(&c, rpc::ListTenantCredentialsRequest(), &resp);
  return PrintTenants(args[0], ctx, s, resp);
}

}  // namespace

const std::vector<AdminGroup>& SecurityAdminGroups() {
  static const std::vector<AdminGroup>* groups = new std::vector<AdminGroup>{
      {{"ca", "init|agent|coordinator --dir DIR", "the cluster CA and its certificates (files only)"},
       "Makes the cluster CA and issues its certificates, in a folder; calls no coordinator.",
       {{kCaInit, RunCaInit}, {kCaAgent, RunCaAgent}, {kCaCoordinator, RunCaCoordinator}}},
      {{"token", "create|list|revoke", "bearer tokens of users and admins"},
       "Bearer tokens: each names a tenant and a role (user or admin).",
       {{kTokenCreate, RunTokenCreate}, {kTokenList, RunTokenList}, {kTokenRevoke, RunTokenRevoke}}},
      {{"tenant", "set|list", "tenants' priority caps"},
       "Tenants' policies: the highest priority their users may submit at.",
       {{kTenantSet, RunTenantSet}, {kTenantList, RunTenantList}}},
      {{"credentials", "set|clear|list", "tenants' object-store credentials (sealed)"},
       "Tenants' object-store credentials, sealed by the coordinator and handed to their jobs.",
       {{kCredentialsSet, RunCredentialsSet},
        {kCredentialsClear, RunCredentialsClear},
        {kCredentialsList, RunCredentialsList}}},
  };
  return *groups;
}

}  // namespace athanor::cli
