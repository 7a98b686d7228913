// The cluster CA (OpenSSL): one self-signed CA, a certificate for the
// coordinator and one per agent, all ECDSA P-256, in one folder:
//
//   DIR/ca.crt  DIR/ca.key                     the CA (ca.key: 0600, stays with the admin)
//   DIR/coordinator.crt  DIR/coordinator.key   names kCoordinatorName
//   DIR/agent-<node>.crt DIR/agent-<node>.key  names AgentName(node); CN = node
//   DIR/admin.token                            the bootstrap admin token (0600)
//   DIR/secrets.key                            the key tenants' secrets are sealed with (0600)
//
// Peers are told apart by the DNS name in their certificate's
// subjectAltName, which gRPC checks on every connection (the client sets the
// name it expects with a target-name override), so certificates do not depend
// on addresses: a node may move hosts and keep its certificate.
// Thread-compatible; every function does blocking file I/O.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace athanor::security {

inline constexpr char kCoordinatorName[] = "coordinator.athanor";
inline constexpr char kAgentNameSuffix[] = ".node.athanor";

// "<node>.node.athanor".
std::string AgentName(const std::string& node);

// Node names that may carry a certificate: 1..63 of [A-Za-z0-9-_], not
// starting with '-'. InvalidArgument naming the problem otherwise.
absl::Status ValidateNodeName(const std::string& node);

// Creates DIR (0700) with a new CA, the coordinator's certificate and a
// bootstrap admin token. AlreadyExists when DIR/ca.key exists: rotating the
// CA is a new folder (docs/security.md).
absl::Status InitClusterCa(const std::string& dir, int valid_days = 825);

// Issues (or re-issues) DIR/agent-<node>.{crt,key} signed by DIR/ca.{crt,key}.
absl::Status IssueAgentCertificate(const std::string& dir, const std::string& node,
                                   int valid_days = 825);

// Re-issues DIR/coordinator.{crt,key} (rotation; the CA stays).
absl::Status IssueCoordinatorCertificate(const std::string& dir, int valid_days = 825);

}  // namespace athanor::security
