#include "security/tls.h"

#include <arpa/inet.h>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/status.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"

namespace athanor::security {
namespace {

// Verified subjectAltNames of the peer ("" entries skipped). gRPC fills
// these only for a certificate that chained to the CA.
std::vector<std::string> PeerNames(const grpc::AuthContext& auth) {
  std::vector<std::string> names;
  if (!auth.IsPeerAuthenticated()) return names;
  for (const grpc::string_ref& v : auth.FindPropertyValues("x509_subject_alternative_name")) {
    names.emplace_back(v.data(), v.size());
  }
  return names;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const std::string& dir, const std::string& base) {
  TlsMaterial m;
  ASSIGN_OR_RETURN(m.ca_pem, ReadSmallFile(dir + "/ca.crt"));
  if (!base.empty()) {
    ASSIGN_OR_RETURN(m.cert_pem, ReadSmallFile(dir + "/" + base + ".crt"));
    ASSIGN_OR_RETURN(m.key_pem, ReadPrivateFile(dir + "/" + base + ".key"));
  }
  return m;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsMaterial& m,
                                                           bool require_client_cert) {
  grpc::SslServerCredentialsOptions options(
      require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                          : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = m.ca_pem;
  options.pem_key_cert_pairs.push_back({m.key_pem, m.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const TlsMaterial& m,
                                                            const std::string& server_name,
                                                            const std::string& bearer_token,
                                                            grpc::ChannelArguments* args) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = m.ca_pem;
  options.pem_private_key = m.key_pem;
  options.pem_cert_chain = m.cert_pem;
  args->SetSslTargetNameOverride(server_name);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::SslCredentials(options);
  if (!bearer_token.empty()) {
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(bearer_token));
  }
  return creds;
}

bool IsLoopbackListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string host = absl::AsciiStrToLower(listen.substr(0, colon));  // port 0 (pick one) allowed
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::optional<std::string> PeerNode(const grpc::AuthContext& auth) {
  for (const std::string& name : PeerNames(auth)) {
    if (absl::EndsWith(name, kAgentNameSuffix) && name.size() > sizeof(kAgentNameSuffix) - 1) {
      std::string node = name.substr(0, name.size() - (sizeof(kAgentNameSuffix) - 1));
      if (ValidateNodeName(node).ok()) return node;
    }
  }
  return std::nullopt;
}

bool PeerIsCoordinator(const grpc::AuthContext& auth) {
  for (const std::string& name : PeerNames(auth)) {
    if (name == kCoordinatorName) return true;
  }
  return false;
}

}  // namespace athanor::security
