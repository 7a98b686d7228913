#include "testing/s3/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace athanor::testing_s3 {
namespace {

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void Reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(FaultProxyOptions options) {
  std::unique_ptr<FaultProxy> proxy(new FaultProxy(std::move(options)));
  if (::pipe2(proxy->stop_pipe_, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  proxy->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(proxy->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(proxy->listen_fd_, 64) != 0) {
    return ErrnoStatus("bind/listen");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  proxy->port_ = ntohs(addr.sin_port);
  FaultProxy* raw = proxy.get();
  proxy->acceptor_ = std::thread([raw] { raw->AcceptLoop(); });
  return proxy;
}

FaultProxy::~FaultProxy() { Stop(); }

void FaultProxy::Stop() {
  if (stopped_) return;
  stopped_ = true;
  char c = 0;
  (void)::write(stop_pipe_[1], &c, 1);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
}

std::map<Fault, int64_t> FaultProxy::faults_injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_;
}

Fault FaultProxy::Choose() {
  std::lock_guard<std::mutex> lock(mu_);
  std::uniform_real_distribution<double> coin(0, 1);
  if (options_.faults.empty() || coin(rng_) >= options_.fault_rate) return Fault::kNone;
  Fault f = options_.faults[rng_() % options_.faults.size()];
  ++injected_[f];
  return f;
}

void FaultProxy::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, client] { Serve(client); });
  }
}

bool FaultProxy::ReadMore(int fd, std::string* buf) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[1].revents) return false;
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf->append(chunk, static_cast<size_t>(n));
    return true;
  }
}

void FaultProxy::Serve(int client) {
  std::string in;
  while (true) {
    // One request: headers, then Content-Length bytes of body.
    size_t header_end;
    while ((header_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(client, &in)) {
        ::close(client);
        return;
      }
    }
    std::string head = in.substr(0, header_end + 2);
    size_t body_len = 0;
    std::string forwarded_head;
    for (absl::string_view line : absl::StrSplit(head, "\r\n", absl::SkipEmpty())) {
      std::string lower = absl::AsciiStrToLower(line);
      if (absl::StartsWith(lower, "content-length:")) {
        (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &body_len);
      }
      if (absl::StartsWith(lower, "connection:")) continue;
      absl::StrAppend(&forwarded_head, line, "\r\n");
    }
    absl::StrAppend(&forwarded_head, "Connection: close\r\n\r\n");
    while (in.size() < header_end + 4 + body_len) {
      if (!ReadMore(client, &in)) {
        ::close(client);
        return;
      }
    }
    std::string body = in.substr(header_end + 4, body_len);
    in.erase(0, header_end + 4 + body_len);
    requests_.fetch_add(1);

    Fault fault = Choose();
    if (fault == Fault::kSlowDown) {
      std::string xml =
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
          "<Message>Please reduce your request rate.</Message></Error>";
      std::string response = absl::StrCat("HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n",
                                          "Content-Length: ", xml.size(), "\r\n\r\n", xml);
      if (!WriteAll(client, response.data(), response.size())) break;
      continue;  // keep-alive
    }
    if (fault == Fault::kReset) {
      Reset(client);
      return;
    }
    if (fault == Fault::kStall) {
      std::string ignored;
      while (ReadMore(client, &ignored)) ignored.clear();  // until the client gives up or Stop()
      ::close(client);
      return;
    }
    int upstream = ConnectLoopback(options_.upstream_port);
    if (upstream < 0) {
      Reset(client);
      return;
    }
    std::string request = forwarded_head + body;
    std::string response;
    bool ok = WriteAll(upstream, request.data(), request.size());
    while (ok && ReadMore(upstream, &response)) {
    }
    ::close(upstream);
    if (!ok || response.empty()) {
      Reset(client);
      return;
    }
    if (fault == Fault::kLoseResponse) {
      Reset(client);
      return;
    }
    size_t send = fault == Fault::kTruncate ? response.size() / 2 : response.size();
    WriteAll(client, response.data(), send);
    break;  // the upstream said "Connection: close"; so do we
  }
  ::close(client);
}

}  // namespace athanor::testing_s3
