// TelemetryClient: a rank's sender on the telemetry side channel to its node
// agent (worker/agent/telemetry_hub.h; protocol in docs/observability.md):
// one unix datagram per step holding the same JSON object the rank prints.
//
// Sending never blocks and never fails the run: a full socket buffer or a
// gone agent drops the message. Disabled (Send does nothing) when no socket
// was named, as under mpirun or athanor-run. Not thread-safe: one sender.
#pragma once

#include <string>

namespace athanor {

class TelemetryClient {
 public:
  // `socket_path`: ATHANOR_TELEMETRY_SOCKET, read by the caller at the edge;
  // empty: disabled.
  explicit TelemetryClient(const std::string& socket_path);
  ~TelemetryClient();
  TelemetryClient(const TelemetryClient&) = delete;
  TelemetryClient& operator=(const TelemetryClient&) = delete;

  bool enabled() const { return fd_ >= 0; }
  void Send(const std::string& json);

 private:
  int fd_ = -1;
};

}  // namespace athanor
