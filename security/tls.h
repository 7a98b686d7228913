// gRPC credentials from the cluster CA's files (cluster_ca.h), and the peer
// names a server reads back from a verified certificate. Every channel pins
// the name it expects (kCoordinatorName, AgentName(node)) with a target-name
// override, so a certificate proves a role and a node, not an address.
// Loading does blocking file I/O; the rest is pure. Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace athanor::security {

// PEM contents of the CA certificate and (for mutual TLS) our own pair.
struct TlsMaterial {
  std::string ca_pem;
  std::string cert_pem;  // empty: no client certificate (the CLI)
  std::string key_pem;
};

// DIR/ca.crt plus DIR/<base>.crt and DIR/<base>.key (the key must be 0600);
// base empty: the CA alone. NotFound / PermissionDenied naming the file.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const std::string& dir, const std::string& base);

// Server side. `require_client_cert`: every peer must present a certificate
// from the CA (agents' control service); otherwise one is verified when
// presented (the coordinator: agents do, the CLI uses tokens).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsMaterial& m,
                                                           bool require_client_cert);

// Client side: verifies the server against the CA, presents our certificate
// when the material has one, and expects the server to be `server_name`
// (set in *args as the target-name override). `bearer_token` non-empty adds
// "authorization: Bearer <token>" to every call.
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const TlsMaterial& m,
                                                            const std::string& server_name,
                                                            const std::string& bearer_token,
                                                            grpc::ChannelArguments* args);

// True for 127.0.0.0/8, ::1 and "localhost" HOST:PORT addresses: the only
// ones --insecure may serve on.
bool IsLoopbackListen(const std::string& listen);

// The node named by the peer's verified certificate (subjectAltName
// "<node>.node.athanor"), if any.
std::optional<std::string> PeerNode(const grpc::AuthContext& auth);
// The peer presented the coordinator's verified certificate.
bool PeerIsCoordinator(const grpc::AuthContext& auth);

}  // namespace athanor::security
