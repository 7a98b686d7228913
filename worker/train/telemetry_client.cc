#include "worker/train/telemetry_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"

namespace athanor {

TelemetryClient::TelemetryClient(const std::string& socket_path) {
  if (socket_path.empty()) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    ATHANOR_LOG(WARNING) << "ATHANOR_TELEMETRY_SOCKET is too long; no telemetry";
    return;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // Connected, so each Send is one cheap send(2) with no address lookup.
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ATHANOR_LOG(WARNING) << "telemetry socket " << socket_path << ": " << strerror(errno) << "; no telemetry";
    close(fd);
    return;
  }
  fd_ = fd;
}

TelemetryClient::~TelemetryClient() {
  if (fd_ >= 0) close(fd_);
}

void TelemetryClient::Send(const std::string& json) {
  if (fd_ < 0) return;
  // Dropped when the agent is behind (EAGAIN) or gone: telemetry is best effort.
  (void)!send(fd_, json.data(), json.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace athanor
