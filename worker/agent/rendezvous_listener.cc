#include "worker/agent/rendezvous_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::agent {

absl::StatusOr<RendezvousListener> ListenForRendezvous(const std::string& address, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT ", port, " is not in 0..65535"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  // Skips only connections of earlier attempts in TIME_WAIT: a socket that
  // listens on the port, on any address, still makes bind or listen fail.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool literal = inet_pton(AF_INET, address.c_str(), &addr.sin_addr) == 1;
  int bound = literal ? bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) : -1;
  if (!literal || (bound != 0 && errno == EADDRNOTAVAIL)) {  // a name, or not this node's address
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (bound != 0 || listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    if (err == EADDRINUSE) {
      return absl::UnavailableError(absl::StrCat(
          "master port ", port, " is in use on this node: another process (possibly another tenant's, "
          "squatting on it) listens there"));
    }
    return ErrnoStatus(absl::StrCat("bind/listen on master port ", port), err);
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return RendezvousListener{fd, ntohs(addr.sin_port)};
}

}  // namespace athanor::agent
