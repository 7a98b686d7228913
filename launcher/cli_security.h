// How the `athanor` CLI reaches the coordinator securely: TLS verified
// against the cluster CA (--ca, else $ATHANOR_CA, else ~/.athanor/ca.crt when
// present) expecting the coordinator's certificate, and a bearer token from
// $ATHANOR_TOKEN, else --token-file / $ATHANOR_TOKEN_FILE, else
// ~/.athanor/token when present. A token file must be mode 0600. Without a
// CA the channel is plaintext (a coordinator started --insecure) and no token
// is ever sent. Reads files; thread-compatible.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace athanor::cli {

struct CliSecurity {
  std::string ca_path;     // empty: plaintext
  std::string token_path;  // empty: $ATHANOR_TOKEN or none
};

// Fills empty fields from the environment and ~/.athanor.
CliSecurity ResolveCliSecurity(CliSecurity flags);

// The bearer token ("" when none is configured). PermissionDenied for a
// token file others may read; InvalidArgument for an empty one.
absl::StatusOr<std::string> ReadCliToken(const CliSecurity& s);

// A channel to `coordinator` as described above.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectCoordinator(const std::string& coordinator,
                                                                  const CliSecurity& s);

}  // namespace athanor::cli
