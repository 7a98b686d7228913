#include "collectives/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/bootstrap/store_protocol.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

namespace proto = store_protocol;
using proto::kAdd, proto::kCancel, proto::kCancelled, proto::kCheck, proto::kError, proto::kGet,
    proto::kHello, proto::kReply, proto::kSet;
using proto::Encode;

// Bytes an unauthenticated client may send before its hello is complete.
constexpr size_t kMaxHelloBytes = proto::kHeaderBytes + 1024;

// Compares in time independent of where the strings differ.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += n;
  }
  return true;
}

// MASTER_ADDR may be an IPv4 literal or a host name (as torchrun allows);
// names resolve to their first IPv4 address.
absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("TCP store port ", port, " is not in 0..65535"));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("TCP store host '", host,
                                                   "' is not an IPv4 address and does not resolve: ",
                                                   rc != 0 ? gai_strerror(rc) : "no address"));
  }
  addr.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return addr;
}

}  // namespace

std::string RendezvousSecretFromEnv() {
  const char* s = std::getenv("ATHANOR_RENDEZVOUS_SECRET");
  return s != nullptr ? s : "";
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port,
                                                                      const std::string& secret) {
  ASSIGN_OR_RETURN(sockaddr_in addr, Resolve(host, port));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("TCP store: bind/listen ", host, ":", port));
    close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    close(fd);
    return ErrnoStatus("pipe");
  }
  auto server = std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(fd, ntohs(addr.sin_port), pipefd[0], pipefd[1], secret));
  server->thread_ = std::thread([s = server.get()] { s->Run(); });
  return server;
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write,
                               std::string secret)
    : listen_fd_(listen_fd), port_(port), wake_read_(wake_read), wake_write_(wake_write),
      secret_(std::move(secret)) {}

void TcpStoreServer::Drain(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return;
  grace_ms_ = grace.count();
  char c = 'd';
  (void)!write(wake_write_, &c, 1);
  thread_.join();
}

TcpStoreServer::~TcpStoreServer() {
  char c = 'x';
  (void)!write(wake_write_, &c, 1);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

namespace {

using KeyValues = std::map<std::string, std::string>;
using Waiters = std::multimap<std::string, int>;  // key -> fds waiting in Get

void Disconnect(int fd, std::map<int, std::string>* inbox, Waiters* waiting, std::set<int>* admitted) {
  for (auto it = waiting->begin(); it != waiting->end();) {
    it = it->second == fd ? waiting->erase(it) : std::next(it);
  }
  inbox->erase(fd);
  admitted->erase(fd);
  close(fd);
}

// Serves one request from `fd`. False (with `error`) for a protocol
// violation, after which the peer is disconnected.
bool Handle(int fd, const proto::Frame& f, KeyValues* data, Waiters* waiting, std::string* error) {
  switch (f.op) {
    case kSet: {
      (*data)[f.key] = f.value;
      WriteAll(fd, Encode(kReply, "", ""));
      auto [lo, hi] = waiting->equal_range(f.key);
      for (auto it = lo; it != hi; ++it) WriteAll(it->second, Encode(kReply, "", f.value));
      waiting->erase(lo, hi);
      return true;
    }
    case kGet: {
      auto it = data->find(f.key);
      if (it != data->end()) {
        WriteAll(fd, Encode(kReply, "", it->second));
      } else {
        waiting->emplace(f.key, fd);
      }
      return true;
    }
    case kAdd: {
      auto it = data->find(f.key);
      std::string sum;
      absl::Status s = proto::ApplyAdd(f.key, it == data->end() ? nullptr : &it->second, f.value, &sum);
      if (absl::IsInvalidArgument(s)) {
        *error = std::string(s.message());
        return false;
      }
      if (!s.ok()) {
        WriteAll(fd, Encode(kError, "", s.message()));
        return true;
      }
      (*data)[f.key] = sum;
      WriteAll(fd, Encode(kReply, "", sum));
      return true;
    }
    case kCancel: {
      auto [lo, hi] = waiting->equal_range(f.key);
      for (auto it = lo; it != hi;) it = it->second == fd ? waiting->erase(it) : std::next(it);
      WriteAll(fd, Encode(kCancelled, "", ""));
      return true;
    }
    case kCheck:
      WriteAll(fd, Encode(kReply, "", data->count(f.key) ? "1" : "0"));
      return true;
    case kHello:  // already admitted (or no secret): nothing to check
      WriteAll(fd, Encode(kReply, "", ""));
      return true;
  }
  *error = "unknown op";
  return false;
}

}  // namespace

void TcpStoreServer::Run() {
  KeyValues data;
  std::map<int, std::string> inbox;  // client fd -> unparsed bytes
  Waiters waiting;
  std::set<int> admitted;  // fds that presented the secret
  bool draining = false;
  std::chrono::steady_clock::time_point drain_end;
  for (;;) {
    if (draining && (inbox.empty() || std::chrono::steady_clock::now() >= drain_end)) break;
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listen_fd_, draining ? short{0} : short{POLLIN}, 0}};
    for (auto& [fd, unused] : inbox) fds.push_back({fd, POLLIN, 0});
    int wait_ms = -1;
    if (draining) {
      wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     drain_end - std::chrono::steady_clock::now()).count()) + 1;
    }
    if (poll(fds.data(), fds.size(), wait_ms) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) {
      char c = 'x';
      (void)!read(wake_read_, &c, 1);
      if (c != 'd' || draining) break;
      draining = true;
      drain_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms_.load());
    }
    if (fds[1].revents & POLLIN) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        inbox[c];
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int fd = fds[i].fd;
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        Disconnect(fd, &inbox, &waiting, &admitted);
        continue;
      }
      std::string& in = inbox[fd];
      in.append(buf, n);
      if (!secret_.empty() && !admitted.count(fd) && in.size() > kMaxHelloBytes) {
        Disconnect(fd, &inbox, &waiting, &admitted);  // no hello this long: not one of ours
        continue;
      }
      proto::Frame frame;
      std::string error;
      for (;;) {
        proto::DecodeResult r = proto::Decode(&in, &frame, &error);
        if (r == proto::DecodeResult::kIncomplete) break;
        if (r == proto::DecodeResult::kFrame && !secret_.empty() && !admitted.count(fd)) {
          // The first frame of a client must present the secret; anything
          // else is a stranger, dropped without an answer.
          if (frame.op != kHello || !SameSecret(frame.value, secret_)) {
            Disconnect(fd, &inbox, &waiting, &admitted);
            break;
          }
          admitted.insert(fd);
          WriteAll(fd, Encode(kReply, "", ""));
          continue;
        }
        if (r == proto::DecodeResult::kFrame && !proto::IsRequestOp(frame.op)) {
          r = proto::DecodeResult::kInvalid;
          error = absl::StrCat("unknown op 0x", absl::Hex(static_cast<unsigned char>(frame.op)));
        }
        if (r == proto::DecodeResult::kFrame && !Handle(fd, frame, &data, &waiting, &error)) {
          r = proto::DecodeResult::kInvalid;
        }
        if (r == proto::DecodeResult::kInvalid) {
          ATHANOR_LOG(WARNING) << "TCP store: disconnecting a peer that broke the protocol: " << error;
          Disconnect(fd, &inbox, &waiting, &admitted);
          break;
        }
      }
    }
  }
  for (auto& [fd, unused] : inbox) close(fd);
}

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, std::chrono::milliseconds timeout, const std::string& secret) {
  ASSIGN_OR_RETURN(sockaddr_in addr, Resolve(host, port));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoStatus("socket");
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(fd, host, port));
      if (!secret.empty()) {
        absl::StatusOr<std::string> hello = client->Call(kHello, "", secret, timeout);
        if (!hello.ok()) {
          return absl::PermissionDeniedError(absl::StrCat(
              "TCP store at ", host, ":", port, " refused this client (rendezvous secret not accepted: ",
              hello.status().message(), ")"));
        }
      }
      return client;
    }
    int err = errno;
    close(fd);
    if (std::chrono::steady_clock::now() + backoff > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("TCP store at ", host, ":", port, " not reachable within ",
                       timeout.count(), " ms: ", strerror(err)));
    }
    // Retry back-off while rank 0 starts its server; not test synchronisation.
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

absl::Status TcpStoreClient::ReadReply(std::chrono::steady_clock::time_point deadline, char* op,
                                       std::string* value) {
  proto::Frame frame;
  std::string error;
  for (;;) {
    proto::DecodeResult r = proto::Decode(&inbox_, &frame, &error);
    if (r == proto::DecodeResult::kFrame && frame.op != kReply && frame.op != kError &&
        frame.op != kCancelled) {
      r = proto::DecodeResult::kInvalid;
      error = absl::StrCat("unknown reply op 0x", absl::Hex(static_cast<unsigned char>(frame.op)));
    }
    if (r == proto::DecodeResult::kInvalid) {
      Break();
      return absl::UnavailableError(absl::StrCat("TCP store at ", host_, ":", port_,
                                                 " sent a malformed reply (", error, ")"));
    }
    if (r == proto::DecodeResult::kFrame) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    int n_ready = left.count() > 0 ? poll(&p, 1, left.count()) : 0;
    if (n_ready < 0 && errno == EINTR) continue;
    if (n_ready == 0) return absl::DeadlineExceededError("no reply");
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      Break();
      return absl::UnavailableError("TCP store: server closed the connection");
    }
    inbox_.append(buf, n);
  }
  *op = frame.op;
  *value = std::move(frame.value);
  return absl::OkStatus();
}

void TcpStoreClient::Break() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  inbox_.clear();
}

absl::StatusOr<std::string> TcpStoreClient::Call(char op, const std::string& key,
                                                 const std::string& value,
                                                 std::chrono::milliseconds timeout) {
  if (key.size() > proto::kMaxKeyBytes || value.size() > proto::kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("TCP store: key '", key.substr(0, 64), "' (", key.size(),
                                                   " bytes) or its value (", value.size(),
                                                   " bytes) is over the size limit"));
  }
  absl::MutexLock lock(&mu_);
  if (fd_ < 0) return absl::UnavailableError("TCP store connection is broken");
  if (!WriteAll(fd_, Encode(op, key, value))) {
    return absl::UnavailableError(absl::StrCat("TCP store: send failed: ", strerror(errno)));
  }
  char rop;
  std::string reply;
  absl::Status s = ReadReply(std::chrono::steady_clock::now() + timeout, &rop, &reply);
  if (s.ok() && rop == kError) return absl::FailedPreconditionError(absl::StrCat("TCP store: ", reply));
  if (s.ok()) return reply;
  if (!absl::IsDeadlineExceeded(s)) return s;
  const auto timed_out = absl::DeadlineExceededError(
      absl::StrCat("TCP store: key '", key, "' not available within ", timeout.count(), " ms"));
  if (op != kGet) {
    Break();
    return timed_out;
  }
  // Withdraw the Get; the value may have raced the withdrawal.
  if (!WriteAll(fd_, Encode(kCancel, key, ""))) return absl::UnavailableError("TCP store: send failed");
  std::optional<std::string> late;
  for (;;) {
    RETURN_IF_ERROR(ReadReply(std::chrono::steady_clock::now() + std::chrono::seconds(10), &rop, &reply));
    if (rop == kCancelled) break;
    late = reply;
  }
  if (late.has_value()) return *late;
  return timed_out;
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  return Call(kSet, key, value, std::chrono::minutes(1)).status();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key,
                                                std::chrono::milliseconds timeout) {
  return Call(kGet, key, "", timeout);
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  ASSIGN_OR_RETURN(std::string v, Call(kAdd, key, std::string(reinterpret_cast<const char*>(&delta), 8),
                                       std::chrono::minutes(1)));
  if (v.size() != 8) {
    return absl::UnavailableError(absl::StrCat("TCP store: Add on '", key, "' answered ", v.size(),
                                               " bytes, not 8"));
  }
  int64_t out = 0;
  std::memcpy(&out, v.data(), 8);
  return out;
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::string& key) {
  ASSIGN_OR_RETURN(std::string v, Call(kCheck, key, "", std::chrono::minutes(1)));
  return v == "1";
}

absl::StatusOr<std::vector<std::string>> AllGatherThroughStore(TcpStoreClient* store,
                                                               const std::string& prefix,
                                                               int rank, int world_size,
                                                               const std::string& value,
                                                               std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(store->Set(absl::StrCat(prefix, "/", rank), value));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> out(world_size);
  for (int r = 0; r < world_size; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto got = store->Get(absl::StrCat(prefix, "/", r), std::max(left, std::chrono::milliseconds(1)));
    if (got.ok()) {
      out[r] = *std::move(got);
      continue;
    }
    if (!absl::IsDeadlineExceeded(got.status())) return got.status();
    std::vector<int> missing = {r};
    for (int k = r + 1; k < world_size; ++k) {
      auto present = store->Check(absl::StrCat(prefix, "/", k));
      if (!present.ok() || !*present) missing.push_back(k);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("bootstrap: rank(s) ", absl::StrJoin(missing, ","), " of ", world_size,
                     " did not join within ", timeout.count(), " ms"));
  }
  return out;
}

}  // namespace athanor
