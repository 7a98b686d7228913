#include "checkpoint/service/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace athanor::ckptsvc {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

absl::Status SendAll(int sock, const char* p, size_t n, int fd) {
  while (n > 0) {
    struct iovec iov = {const_cast<char*>(p), n};
    struct msghdr mh = {};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
      std::memset(control, 0, sizeof(control));
      mh.msg_control = control;
      mh.msg_controllen = sizeof(control);
      struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t w = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("checkpoint service socket send");
    }
    p += w;
    n -= static_cast<size_t>(w);
    fd = -1;  // attached once
  }
  return absl::OkStatus();
}

// Reads exactly n bytes; collects at most one fd into *fd.
absl::Status RecvAll(int sock, char* p, size_t n, int* fd, bool* eof_at_start) {
  size_t got = 0;
  while (got < n) {
    struct iovec iov = {p + got, n - got};
    struct msghdr mh = {};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    ssize_t r = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno("checkpoint service socket receive");
    }
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int received;
        std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (*fd < 0) {
          *fd = received;
        } else {
          ::close(received);  // one fd per frame; extras are dropped
        }
      }
    }
    if (r == 0) {
      if (eof_at_start != nullptr) *eof_at_start = got == 0;
      return absl::UnavailableError("checkpoint service socket: peer closed");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendFrame(int sock, const nlohmann::json& msg, int fd) {
  std::string body = msg.dump();
  if (body.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint service frame of ", body.size(),
                                                   " bytes exceeds ", kMaxFrameBytes));
  }
  std::string frame(4, '\0');
  uint32_t n = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame += body;
  return SendAll(sock, frame.data(), frame.size(), fd);
}

absl::StatusOr<Frame> RecvFrame(int sock) {
  Frame f;
  unsigned char len[4];
  absl::Status s = RecvAll(sock, reinterpret_cast<char*>(len), 4, &f.fd, nullptr);
  auto fail = [&f](absl::Status st) {
    if (f.fd >= 0) ::close(f.fd);
    f.fd = -1;
    return st;
  };
  if (!s.ok()) return fail(s);
  uint32_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  if (n > kMaxFrameBytes) {
    return fail(absl::DataLossError(absl::StrCat("checkpoint service frame announces ", n,
                                                 " bytes, more than ", kMaxFrameBytes)));
  }
  std::string body(n, '\0');
  s = RecvAll(sock, body.data(), n, &f.fd, nullptr);
  if (!s.ok()) return fail(s);
  f.msg = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (f.msg.is_discarded() || !f.msg.is_object()) {
    return fail(absl::DataLossError("checkpoint service frame is not a JSON object"));
  }
  return f;
}

absl::StatusOr<int> ConnectService(const std::string& socket_path) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint service socket path is too long: ", socket_path));
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return Errno("socket");
  if (::connect(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = Errno(absl::StrCat("connecting to the checkpoint service at ", socket_path));
    ::close(sock);
    return s;
  }
  return sock;
}

absl::StatusOr<int> ListenService(const std::string& socket_path, unsigned mode) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint service socket path is too long: ", socket_path));
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ::unlink(socket_path.c_str());
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return Errno("socket");
  if (::bind(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(socket_path.c_str(), mode) != 0 || ::listen(sock, 64) != 0) {
    absl::Status s = Errno(absl::StrCat("listening on ", socket_path));
    ::close(sock);
    return s;
  }
  return sock;
}

}  // namespace athanor::ckptsvc
