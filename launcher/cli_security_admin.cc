// `athanor admin`: the cluster CA, bearer tokens and tenants' limits.
//
//   athanor admin ca init --dir DIR              CA, coordinator certificate, admin.token
//   athanor admin ca agent --dir DIR --node N    a node's agent certificate
//   athanor admin ca coordinator --dir DIR       re-issue the coordinator's certificate
//   athanor admin token create --tenant T [--role user|admin] [--ttl D] [--description S]
//   athanor admin token list [--tenant T] [--json]
//   athanor admin token revoke ID
//   athanor admin tenant set T --max-priority P
//   athanor admin tenant list [--json]
//   athanor admin credentials set TENANT --file F   a tenant's store credentials (F: 0600,
//                                                   lines access_key=, secret_key=, session_token=)
//   athanor admin credentials clear TENANT | list
//
// `ca` works on files only; the others call the coordinator's Security
// service (admins only). A new token is printed once, alone on stdout.
#include <time.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_format.h"
#include "launcher/cli_util.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"

namespace athanor::cli {
namespace {

constexpr char kUsage[] =
    "usage: athanor admin ca init --dir DIR               make the cluster CA, the coordinator's\n"
    "                                                     certificate and a bootstrap admin token\n"
    "       athanor admin ca agent --dir DIR --node NAME  a node's agent certificate\n"
    "       athanor admin ca coordinator --dir DIR        re-issue the coordinator's certificate\n"
    "       athanor admin token create --tenant T [--role user|admin] [--ttl D] [--description S]\n"
    "       athanor admin token list [--tenant T] [--json]\n"
    "       athanor admin token revoke ID\n"
    "       athanor admin tenant set TENANT --max-priority P\n"
    "       athanor admin tenant list [--json]\n"
    "       athanor admin credentials set TENANT --file F   a tenant's object-store credentials\n"
    "                  (F: mode 0600, lines access_key=..., secret_key=..., session_token=...)\n"
    "       athanor admin credentials clear TENANT | list\n";

int Usage(const std::string& msg) {
  if (!msg.empty()) std::cerr << "athanor admin: " << msg << "\n\n";
  std::cerr << kUsage;
  return kExitUsage;
}

int FileError(const std::string& what, const absl::Status& s) {
  std::cerr << "athanor admin " << what << ": " << s.message() << "\n";
  return kExitRpcError;
}

std::string When(int64_t unix) {
  if (unix == 0) return "never";
  time_t t = static_cast<time_t>(unix);
  char buf[32];
  struct tm tm;
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
  return buf;
}

int RunCa(const std::vector<std::string>& args) {
  std::string verb = args.size() > 1 ? args[1] : "";
  std::string dir, node;
  po::options_description desc("athanor admin ca options");
  desc.add_options()
      ("dir", po::value(&dir)->required(), "the cluster CA folder")
      ("node", po::value(&node), "the node an agent certificate names");
  ParsedCommandLine cmd;
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty()) return Usage("ca: expected init, agent or coordinator");
  rest[0] = "admin ca " + verb;
  if (int rc = ParseFlags(rest, desc, kUsage, &cmd); rc >= 0) return rc;
  absl::Status s;
  if (verb == "init") {
    s = security::InitClusterCa(dir);
    if (s.ok()) {
      std::cout << "cluster CA in " << dir << ": ca.crt, coordinator.crt/.key, admin.token "
                << "(keep ca.key and admin.token private)\n";
    }
  } else if (verb == "agent") {
    if (node.empty()) return Usage("ca agent: --node is required");
    s = security::IssueAgentCertificate(dir, node);
    if (s.ok()) std::cout << "agent certificate for node " << node << " in " << dir << "/agent-" << node << ".crt\n";
  } else if (verb == "coordinator") {
    s = security::IssueCoordinatorCertificate(dir);
    if (s.ok()) std::cout << "coordinator certificate re-issued in " << dir << "/coordinator.crt\n";
  } else {
    return Usage("ca: expected init, agent or coordinator, got '" + verb + "'");
  }
  return s.ok() ? kExitOk : FileError("ca " + verb, s);
}

void PrintToken(const rpc::TokenInfo& t) {
  std::cout << t.id() << "  " << t.tenant() << "  " << t.role() << "  created " << When(t.created_unix())
            << "  expires " << When(t.expires_unix()) << (t.revoked() ? "  REVOKED" : "")
            << (t.description().empty() ? "" : "  " + t.description()) << "\n";
}

int RunToken(CliContext& ctx, const std::vector<std::string>& args) {
  std::string verb = args.size() > 1 ? args[1] : "";
  std::string tenant, role = "user", ttl, description, id;
  bool json = false;
  po::options_description desc("athanor admin token options");
  desc.add_options()
      ("tenant", po::value(&tenant), "the token's tenant")
      ("role", po::value(&role)->default_value("user"), "user or admin")
      ("ttl", po::value(&ttl), "lifetime, e.g. 30m, 12h, 90d (default: no expiry)")
      ("description", po::value(&description), "a note shown by `token list`")
      ("id", po::value(&id), "the token id to revoke")
      ("json", po::bool_switch(&json), "print the response as JSON");
  po::positional_options_description pos;
  pos.add("id", 1);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty()) return Usage("token: expected create, list or revoke");
  rest[0] = "admin token " + verb;
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(rest, desc, kUsage, &cmd, &pos); rc >= 0) return rc;
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  if (verb == "create") {
    if (tenant.empty()) return Usage("token create: --tenant is required");
    rpc::CreateTokenRequest req;
    req.set_tenant(tenant);
    req.set_role(role);
    req.set_description(description);
    if (!ttl.empty()) {
      std::optional<int64_t> s = ParseDurationSeconds(ttl);
      if (!s || *s <= 0) return Usage("token create: --ttl expects a duration like 30m, 12h or 90d");
      req.set_ttl_s(*s);
    }
    rpc::CreateTokenResponse resp;
    grpc::Status s = stub->CreateToken(&c, req, &resp);
    if (!s.ok()) return RpcError("admin token create", ctx, s);
    std::cout << resp.token() << "\n";
    std::cerr << "token " << resp.info().id() << " for tenant " << resp.info().tenant() << " ("
              << resp.info().role() << ", expires " << When(resp.info().expires_unix())
              << "): shown once; store it mode 0600\n";
    return kExitOk;
  }
  if (verb == "list") {
    rpc::ListTokensRequest req;
    req.set_tenant(tenant);
    rpc::ListTokensResponse resp;
    grpc::Status s = stub->ListTokens(&c, req, &resp);
    if (!s.ok()) return RpcError("admin token list", ctx, s);
    if (json) {
      std::cout << ToJson(resp);
    } else {
      for (const rpc::TokenInfo& t : resp.tokens()) PrintToken(t);
    }
    return kExitOk;
  }
  if (verb == "revoke") {
    if (id.empty()) return Usage("token revoke: expected a token ID");
    rpc::RevokeTokenRequest req;
    req.set_id(id);
    rpc::RevokeTokenResponse resp;
    grpc::Status s = stub->RevokeToken(&c, req, &resp);
    if (!s.ok()) return RpcError("admin token revoke", ctx, s);
    PrintToken(resp.info());
    return kExitOk;
  }
  return Usage("token: expected create, list or revoke, got '" + verb + "'");
}

int RunTenant(CliContext& ctx, const std::vector<std::string>& args) {
  std::string verb = args.size() > 1 ? args[1] : "";
  std::string tenant;
  int32_t max_priority = 0;
  bool json = false;
  po::options_description desc("athanor admin tenant options");
  desc.add_options()
      ("tenant", po::value(&tenant), "the tenant")
      ("max-priority", po::value(&max_priority), "highest priority its users may submit at")
      ("json", po::bool_switch(&json), "print the response as JSON");
  po::positional_options_description pos;
  pos.add("tenant", 1);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty()) return Usage("tenant: expected set or list");
  rest[0] = "admin tenant " + verb;
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(rest, desc, kUsage, &cmd, &pos); rc >= 0) return rc;
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantPoliciesResponse resp;
  grpc::Status s;
  if (verb == "set") {
    if (tenant.empty() || cmd.vars.count("max-priority") == 0) {
      return Usage("tenant set: expected TENANT --max-priority P");
    }
    rpc::SetTenantPolicyRequest req;
    req.mutable_policy()->set_tenant(tenant);
    req.mutable_policy()->set_max_priority(max_priority);
    s = stub->SetTenantPolicy(&c, req, &resp);
  } else if (verb == "list") {
    s = stub->ListTenantPolicies(&c, rpc::ListTenantPoliciesRequest(), &resp);
  } else {
    return Usage("tenant: expected set or list, got '" + verb + "'");
  }
  if (!s.ok()) return RpcError("admin tenant " + verb, ctx, s);
  if (json) {
    std::cout << ToJson(resp);
  } else {
    for (const rpc::TenantPolicy& p : resp.policies()) {
      std::cout << p.tenant() << "  max priority " << p.max_priority() << "\n";
    }
  }
  return kExitOk;
}

int RunCredentials(CliContext& ctx, const std::vector<std::string>& args) {
  std::string verb = args.size() > 1 ? args[1] : "";
  std::string tenant, file;
  po::options_description desc("athanor admin credentials options");
  desc.add_options()
      ("tenant", po::value(&tenant), "the tenant")
      ("file", po::value(&file), "key=value lines: access_key, secret_key, session_token (mode 0600)");
  po::positional_options_description pos;
  pos.add("tenant", 1);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty()) return Usage("credentials: expected set, clear or list");
  rest[0] = "admin credentials " + verb;
  ParsedCommandLine cmd;
  if (int rc = ParseFlags(rest, desc, kUsage, &cmd, &pos); rc >= 0) return rc;
  auto stub = rpc::Security::NewStub(ctx.channel);
  grpc::ClientContext c;
  PrepareCall(ctx, &c);
  rpc::ListTenantCredentialsResponse resp;
  grpc::Status s;
  if (verb == "set" || verb == "clear") {
    if (tenant.empty()) return Usage("credentials " + verb + ": expected a TENANT");
    rpc::SetTenantCredentialsRequest req;
    req.set_tenant(tenant);
    if (verb == "set") {
      if (file.empty()) return Usage("credentials set: --file is required (secrets never go on a command line)");
      absl::StatusOr<std::string> text = security::ReadPrivateFile(file);
      if (!text.ok()) return FileError("credentials set", text.status());
      for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
        std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
        std::string key(absl::StripAsciiWhitespace(kv.first));
        std::string value(absl::StripAsciiWhitespace(kv.second));
        if (key == "access_key") req.mutable_credentials()->set_access_key(value);
        else if (key == "secret_key") req.mutable_credentials()->set_secret_key(value);
        else if (key == "session_token") req.mutable_credentials()->set_session_token(value);
        else return FileError("credentials set", absl::InvalidArgumentError(file + ": unknown key '" + key + "'"));
      }
      if (req.credentials().access_key().empty() || req.credentials().secret_key().empty()) {
        return FileError("credentials set",
                         absl::InvalidArgumentError(file + ": needs access_key= and secret_key= lines"));
      }
    }
    s = stub->SetTenantCredentials(&c, req, &resp);
  } else if (verb == "list") {
    s = stub->ListTenantCredentials(&c, rpc::ListTenantCredentialsRequest(), &resp);
  } else {
    return Usage("credentials: expected set, clear or list, got '" + verb + "'");
  }
  if (!s.ok()) return RpcError("admin credentials " + verb, ctx, s);
  for (const std::string& t : resp.tenants()) std::cout << t << "\n";
  return kExitOk;
}

}  // namespace

int RunAdmin(CliContext& ctx, const std::vector<std::string>& args) {
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (rest.empty() || rest[0] == "--help" || rest[0] == "-h") {
    std::cout << kUsage;
    return rest.empty() ? kExitUsage : kExitOk;
  }
  if (rest[0] == "ca") return RunCa(rest);
  if (rest[0] == "token") return RunToken(ctx, rest);
  if (rest[0] == "tenant") return RunTenant(ctx, rest);
  if (rest[0] == "credentials") return RunCredentials(ctx, rest);
  return Usage("unknown admin command '" + rest[0] + "'");
}

}  // namespace athanor::cli
