// AgentInteractive.Tunnel (agent_interactive_service.h): a byte stream
// between the coordinator's notebook proxy and the notebook server of a
// running notebook rank here, through the server's unix socket.
//
// The proxy sends one HTTP request (or WebSocket upgrade) per tunnel, its
// head whole in the first data message; the agent adds the server's token
// (`Authorization: token ...`, notebook_ranks.h) after the request line, so
// that the token never leaves this node, and then relays bytes both ways:
// a thread copies the socket to the stream while the call's thread copies the
// stream to the socket. Either side's end ends the tunnel.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "worker/agent/agent_interactive_service.h"
#include "worker/agent/notebook_ranks.h"

namespace athanor::agent {
namespace {

constexpr size_t kMaxChunk = 64 * 1024;
constexpr size_t kMaxRequestLine = 16 * 1024;
constexpr size_t kMaxTunnelMessage = 1 << 20;  // TunnelData.data

grpc::Status Error(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

grpc::Status AgentInteractiveService::Tunnel(grpc::ServerContext* ctx,
                                             grpc::ServerReaderWriter<rpc::TunnelData, rpc::TunnelData>* stream) {
  NotebookRanks* notebooks = this->notebooks();
  if (supervisor() == nullptr || notebooks == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the agent is starting; try again");
  }
  rpc::TunnelData first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "tunnel: no open message");
  if (!first.has_open() || first.open().job_id().empty() || first.open().job_id().size() > 64) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "tunnel: the first message must hold open{job_id (1..64 bytes), attempt, rank}");
  }
  const rpc::TunnelOpen& open = first.open();
  absl::StatusOr<NotebookRanks::Endpoint> ep = notebooks->Find({open.job_id(), open.attempt(), open.rank()});
  if (!ep.ok()) return Error(ep.status());
  sockaddr_un addr{};
  if (ep->socket_path.size() >= sizeof(addr.sun_path)) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "tunnel: the notebook's socket path is too long");
  }
  // The request's head: the token goes in after its request line.
  rpc::TunnelData head;
  if (!stream->Read(&head)) return grpc::Status::OK;  // closed before any request
  size_t eol = head.data().find("\r\n");
  if (eol == std::string::npos || eol > kMaxRequestLine) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "tunnel: the first data must hold an HTTP request line ended by CRLF");
  }
  std::string request = head.data();
  request.insert(eol + 2, absl::StrCat("Authorization: token ", ep->token, "\r\n"));

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("tunnel: socket: ", strerror(errno)));
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, ep->socket_path.data(), ep->socket_path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    close(fd);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("job ", open.job_id(), " rank ", open.rank(),
                                     ": the notebook server does not answer yet (", strerror(e), ")"));
  }
  if (!WriteAll(fd, request.data(), request.size())) {
    close(fd);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "tunnel: the notebook server closed its socket");
  }
  // Socket -> stream, until the server closes (or the socket is shut down).
  std::thread out([fd, stream] {
    std::string buf(kMaxChunk, '\0');
    for (;;) {
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      rpc::TunnelData d;
      d.set_data(buf.data(), static_cast<size_t>(n));
      if (!stream->Write(d)) break;
    }
    rpc::TunnelData eof;
    eof.set_eof(true);
    stream->Write(eof);  // the proxy then ends its side; false: it already has
  });
  // Stream -> socket, until the proxy ends its side.
  rpc::TunnelData in;
  while (!ctx->IsCancelled() && stream->Read(&in)) {
    if (in.data().size() > kMaxTunnelMessage) break;
    if (!in.data().empty() && !WriteAll(fd, in.data().data(), in.data().size())) break;
    if (in.eof()) {
      shutdown(fd, SHUT_WR);  // the browser is done sending; its answer may still come
    }
  }
  shutdown(fd, SHUT_RDWR);
  out.join();
  close(fd);
  return grpc::Status::OK;
}

}  // namespace athanor::agent
