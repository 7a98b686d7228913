#include "launcher/cli_security.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/coordinator_channel.h"
#include "common/status.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"
#include "security/tls.h"

namespace athanor::cli {
namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

std::string HomeFile(const char* name) {
  std::string home = Env("HOME");
  if (home.empty()) return "";
  std::string path = absl::StrCat(home, "/.athanor/", name);
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? path : "";
}

}  // namespace

CliSecurity ResolveCliSecurity(CliSecurity s) {
  if (s.ca_path.empty()) s.ca_path = Env("ATHANOR_CA");
  if (s.ca_path.empty()) s.ca_path = HomeFile("ca.crt");
  if (s.token_path.empty()) s.token_path = Env("ATHANOR_TOKEN_FILE");
  if (s.token_path.empty() && Env("ATHANOR_TOKEN").empty()) s.token_path = HomeFile("token");
  return s;
}

absl::StatusOr<std::string> ReadCliToken(const CliSecurity& s) {
  std::string token = Env("ATHANOR_TOKEN");
  if (token.empty() && !s.token_path.empty()) {
    ASSIGN_OR_RETURN(token, security::ReadPrivateFile(s.token_path));
    token = std::string(absl::StripAsciiWhitespace(token));
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(s.token_path, " is empty"));
  }
  return std::string(absl::StripAsciiWhitespace(token));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectCoordinator(const std::string& coordinator,
                                                                  const CliSecurity& s) {
  // A list of coordinators: the one that leads answers (common/coordinator_targets.h).
  grpc::ChannelArguments args;
  ASSIGN_OR_RETURN(std::string target, CoordinatorDialTarget(coordinator, &args));
  if (s.ca_path.empty()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  security::TlsMaterial m;
  ASSIGN_OR_RETURN(m.ca_pem, security::ReadSmallFile(s.ca_path));
  ASSIGN_OR_RETURN(std::string token, ReadCliToken(s));
  std::shared_ptr<grpc::ChannelCredentials> creds =
      security::ClientCredentials(m, security::kCoordinatorName, token, &args);
  return grpc::CreateCustomChannel(target, creds, args);
}

}  // namespace athanor::cli
