// A one-shot TLS client for HTTPS endpoints served by TlsFront: connects,
// verifies the server's certificate against the cluster CA and the name it
// must carry, sends `request` verbatim and reads until the server closes.
// Used by tests and tools that read /metrics or the dashboard's API.
// Blocking; thread-safe (no shared state).
#pragma once

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace athanor::security {

// `address` is IPv4 HOST:PORT. Unavailable when it cannot connect or the
// handshake fails (naming why, e.g. a certificate that does not verify);
// DeadlineExceeded when a read or write stalls for `timeout`.
absl::StatusOr<std::string> TlsExchange(const std::string& address, const std::string& ca_pem,
                                        const std::string& server_name, const std::string& request,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace athanor::security
