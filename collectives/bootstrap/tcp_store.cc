#include "collectives/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "collectives/bootstrap/store_auth.h"
#include "collectives/bootstrap/store_protocol.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace {

namespace proto = store_protocol;
using proto::kAdd, proto::kCancel, proto::kCancelled, proto::kChallenge, proto::kCheck,
    proto::kDenied, proto::kError, proto::kGet, proto::kHello, proto::kReply, proto::kSet;
using proto::Encode;

// Bytes a client may send before it has proven the secret (hello and proof
// are under 100 bytes).
constexpr size_t kMaxHandshakeBytes = proto::kHeaderBytes + 1024;
// The largest answer a client reads from a listener it does not trust yet.
constexpr size_t kMaxChallengeBytes = proto::kHeaderBytes + 256;
// A store answers the challenge at once; a listener that does not is no
// store of this attempt, and the rank should learn so quickly.
constexpr std::chrono::milliseconds kHandshakeTimeout = std::chrono::seconds(10);
// Refusals logged one by one; after these, one line in every kLogEveryRefusal.
constexpr uint64_t kLoggedRefusals = 16, kLogEveryRefusal = 256;

std::string PeerAddress(const sockaddr_in& addr) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
  return absl::StrCat(ip, ":", ntohs(addr.sin_port));
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

namespace {

// A duplicate of `fd`, checked to be a listening IPv4 TCP socket (bound to
// `port` unless that is 0); the original is made close-on-exec, so the rank's
// own children do not inherit the agent's socket.
absl::StatusOr<int> AdoptListener(int fd, int port) {
  const std::string what = absl::StrCat("TCP store: the listening socket passed as descriptor ", fd);
  int listening = 0, domain = 0, type = 0;
  socklen_t len = sizeof(int);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not an open socket: ", strerror(errno)));
  }
  len = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
  len = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
  sockaddr_in addr{};
  socklen_t addr_len = sizeof(addr);
  if (!listening || domain != AF_INET || type != SOCK_STREAM ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a listening IPv4 TCP socket"));
  }
  if (port != 0 && ntohs(addr.sin_port) != port) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " listens on port ", ntohs(addr.sin_port), ", not on MASTER_PORT ", port));
  }
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return ErrnoStatus(absl::StrCat(what, ": dup"));
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return own;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port,
                                                                      const StoreServerOptions& options) {
  const std::string& secret = options.secret;
  ASSIGN_OR_RETURN(sockaddr_in addr, Resolve(host, port));
  if (options.listen_fd >= 0) {
    ASSIGN_OR_RETURN(int fd, AdoptListener(options.listen_fd, port));
    return Serve(fd, secret);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    const int err = errno;
    close(fd);
    if (err == EADDRINUSE) {
      // SO_REUSEADDR only skips TIME_WAIT: a process listens on the port.
      return absl::UnavailableError(absl::StrCat(
          "TCP store: cannot listen on ", host, ":", port,
          ": address already in use; another process on this node (possibly another tenant's, "
          "squatting on the port) listens there, so this attempt's ranks cannot rendezvous on it"));
    }
    return ErrnoStatus(absl::StrCat("TCP store: bind/listen ", host, ":", port), err);
  }
  return Serve(fd, secret);
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Serve(int fd, const std::string& secret) {
  sockaddr_in addr{};
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

void TcpStoreServer::Refused(const std::string& peer, const std::string& why) {
  std::string line = absl::StrCat("TCP store on port ", port_, " refused ", peer, ": ", why);
  uint64_t count = 0;
  {
    absl::MutexLock lock(&refusals_mu_);
    count = ++refusal_count_;
    refusals_.push_back(line);
    if (refusals_.size() > kMaxRefusals) refusals_.pop_front();
  }
  if (count <= kLoggedRefusals || count % kLogEveryRefusal == 0) {
    ATHANOR_LOG(WARNING) << line << " (refusal " << count << ")";
  }
}

std::vector<std::string> TcpStoreServer::Refusals(size_t at_least, std::chrono::milliseconds timeout) {
  struct Enough {
    const uint64_t* count;
    size_t at_least;
    bool operator()() const { return *count >= at_least; }
  };
  absl::MutexLock lock(&refusals_mu_);
  Enough enough{&refusal_count_, at_least};
  refusals_mu_.AwaitWithTimeout(absl::Condition(&enough), absl::FromChrono(timeout));
  return {refusals_.begin(), refusals_.end()};
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

// One client connection, as the server thread sees it.
struct Peer {
  std::string inbox;    // bytes read but not yet decoded
  std::string address;  // "ip:port", for refusals
  // Until the client has proven the secret; null once admitted, and always
  // for a store without a secret.
  std::unique_ptr<store_auth::StoreHandshake> handshake;
  bool spoke = false;  // sent at least one byte (a bare connect is no refusal)
};
using Peers = std::map<int, Peer>;  // by fd

void Disconnect(int fd, Peers* peers, Waiters* waiting) {
  for (auto it = waiting->begin(); it != waiting->end();) {
    it = it->second == fd ? waiting->erase(it) : std::next(it);
  }
  peers->erase(fd);
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
  }
  *error = "unknown op";
  return false;
}

}  // namespace

void TcpStoreServer::Run() {
  KeyValues data;
  Peers peers;
  Waiters waiting;
  bool draining = false;
  std::chrono::steady_clock::time_point drain_end;
  for (;;) {
    if (draining && (peers.empty() || std::chrono::steady_clock::now() >= drain_end)) break;
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listen_fd_, draining ? short{0} : short{POLLIN}, 0}};
    for (auto& [fd, unused] : peers) fds.push_back({fd, POLLIN, 0});
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
      sockaddr_in from{};
      socklen_t from_len = sizeof(from);
      int c = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        Peer peer;
        peer.address = PeerAddress(from);
        if (!secret_.empty()) {
          absl::StatusOr<std::string> nonce = store_auth::NewNonce();
          if (!nonce.ok()) {
            ATHANOR_LOG(ERROR) << nonce.status() << "; dropping " << peer.address;
            close(c);
            c = -1;
          } else {
            peer.handshake = std::make_unique<store_auth::StoreHandshake>(secret_, *std::move(nonce));
          }
        }
        if (c >= 0) peers.emplace(c, std::move(peer));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int fd = fds[i].fd;
      Peer& peer = peers.at(fd);
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        if (peer.handshake != nullptr && peer.spoke) {
          Refused(peer.address,
                  "it hung up during the rendezvous handshake without proving the secret (a rank "
                  "of another attempt or tenant that could not verify this store's proof?)");
        }
        Disconnect(fd, &peers, &waiting);
        continue;
      }
      peer.spoke = true;
      std::string& in = peer.inbox;
      in.append(buf, n);
      if (peer.handshake != nullptr && in.size() > kMaxHandshakeBytes) {
        Refused(peer.address, absl::StrCat("it sent over ", kMaxHandshakeBytes,
                                           " bytes without proving the rendezvous secret"));
        Disconnect(fd, &peers, &waiting);
        continue;
      }
      proto::Frame frame;
      std::string error;
      for (;;) {
        proto::DecodeResult r = proto::Decode(&in, &frame, &error);
        if (r == proto::DecodeResult::kIncomplete) break;
        if (r == proto::DecodeResult::kFrame && peer.handshake != nullptr) {
          std::string reply, why;
          const auto outcome = peer.handshake->OnFrame(frame, &reply, &why);
          WriteAll(fd, reply);
          if (outcome == store_auth::StoreHandshake::Outcome::kRefused) {
            Refused(peer.address, why);
            Disconnect(fd, &peers, &waiting);
            break;
          }
          if (outcome == store_auth::StoreHandshake::Outcome::kAdmitted) peer.handshake.reset();
          continue;
        }
        if (r == proto::DecodeResult::kFrame && frame.op == kHello && secret_.empty()) {
          // Admitting it would let a squatter pass for this store; the
          // client must hear that no proof will come.
          WriteAll(fd, Encode(kDenied, store_auth::kDeniedNoSecret, ""));
          Refused(peer.address,
                  "it asked for proof of a rendezvous secret, and this store was started without one");
          Disconnect(fd, &peers, &waiting);
          break;
        }
        if (r == proto::DecodeResult::kFrame && (!proto::IsRequestOp(frame.op) || frame.op == kHello)) {
          r = proto::DecodeResult::kInvalid;
          error = absl::StrCat("unexpected op 0x", absl::Hex(static_cast<unsigned char>(frame.op)));
        }
        if (r == proto::DecodeResult::kFrame && !Handle(fd, frame, &data, &waiting, &error)) {
          r = proto::DecodeResult::kInvalid;
        }
        if (r == proto::DecodeResult::kInvalid) {
          ATHANOR_LOG(WARNING) << "TCP store: disconnecting " << peer.address
                               << ", which broke the protocol: " << error;
          Disconnect(fd, &peers, &waiting);
          break;
        }
      }
    }
  }
  for (auto& [fd, unused] : peers) close(fd);
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
      if (!secret.empty()) RETURN_IF_ERROR(client->Authenticate(secret, std::min(timeout, kHandshakeTimeout)));
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

std::string TcpStoreClient::Address() const { return absl::StrCat(host_, ":", port_); }

absl::Status TcpStoreClient::Authenticate(const std::string& secret, std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::string nonce, store_auth::NewNonce());
  const store_auth::ClientHandshake handshake(secret, std::move(nonce));
  const std::string untrusted =
      absl::StrCat("TCP store at ", Address(),
                   ": the listener does not know this attempt's rendezvous secret (possibly another "
                   "tenant's process on the port); nothing secret was sent to it: ");
  absl::MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!WriteAll(fd_, handshake.Hello())) {
    const int err = errno;
    Break();
    return absl::UnavailableError(absl::StrCat("TCP store at ", Address(),
                                               ": sending the rendezvous challenge failed: ", strerror(err)));
  }
  proto::Frame challenge;
  absl::Status read = ReadReply(deadline, &challenge, kMaxChallengeBytes);
  if (absl::IsDeadlineExceeded(read)) {
    Break();
    return absl::DeadlineExceededError(absl::StrCat(
        "TCP store at ", Address(), ": the listener did not prove within ", timeout.count(),
        " ms that it knows this attempt's rendezvous secret (possibly another tenant's process on "
        "the port, or a store too busy to answer); nothing secret was sent to it"));
  }
  if (!read.ok()) return absl::PermissionDeniedError(absl::StrCat(untrusted, read.message()));
  absl::StatusOr<std::string> proof = handshake.OnChallenge(challenge);
  if (!proof.ok()) {
    Break();
    return absl::PermissionDeniedError(absl::StrCat(untrusted, proof.status().message()));
  }
  // The listener has proven the secret: from here on it is this attempt's store.
  proto::Frame verdict;
  absl::Status sent = WriteAll(fd_, *proof) ? ReadReply(deadline, &verdict, kMaxChallengeBytes)
                                            : absl::UnavailableError(strerror(errno));
  if (sent.ok() && verdict.op == kReply) return absl::OkStatus();
  Break();
  if (sent.ok() && verdict.op == kDenied) {
    return absl::PermissionDeniedError(absl::StrCat(
        "TCP store at ", Address(), " proved this attempt's rendezvous secret but refused this rank's "
        "proof (a relay between two stores?)"));
  }
  return absl::UnavailableError(absl::StrCat(
      "TCP store at ", Address(), ": the rendezvous handshake broke off after the store's proof: ",
      sent.ok() ? absl::StrCat("op 0x", absl::Hex(static_cast<unsigned char>(verdict.op))) : sent.message()));
}

absl::Status TcpStoreClient::ReadReply(std::chrono::steady_clock::time_point deadline,
                                       proto::Frame* frame, size_t max_bytes) {
  std::string error;
  for (;;) {
    proto::DecodeResult r = proto::Decode(&inbox_, frame, &error);
    if (r == proto::DecodeResult::kFrame && frame->op != kReply && frame->op != kError &&
        frame->op != kCancelled && frame->op != kChallenge && frame->op != kDenied) {
      r = proto::DecodeResult::kInvalid;
      error = absl::StrCat("unknown reply op 0x", absl::Hex(static_cast<unsigned char>(frame->op)));
    }
    const size_t size = r == proto::DecodeResult::kFrame
                            ? proto::kHeaderBytes + frame->key.size() + frame->value.size()
                            : inbox_.size();
    if (r != proto::DecodeResult::kInvalid && size > max_bytes) {
      r = proto::DecodeResult::kInvalid;
      error = absl::StrCat("a reply of over ", max_bytes, " bytes where at most that was expected");
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
      return absl::UnavailableError(absl::StrCat("TCP store at ", host_, ":", port_, " closed the connection"));
    }
    inbox_.append(buf, n);
  }
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
  proto::Frame reply;
  absl::Status s = ReadReply(std::chrono::steady_clock::now() + timeout, &reply);
  if (s.ok() && reply.op == kDenied) {
    // The store hangs up after a refusal. Unavailable, as for any closed
    // connection; the message says why.
    Break();
    return absl::UnavailableError(absl::StrCat(
        "TCP store at ", Address(), " requires this attempt's rendezvous secret and this client has none "
        "(ATHANOR_RENDEZVOUS_SECRET unset?); it refused the request and closed the connection"));
  }
  if (s.ok() && reply.op == kChallenge) {
    Break();
    return absl::UnavailableError(absl::StrCat("TCP store at ", Address(), " sent a challenge unasked"));
  }
  if (s.ok() && reply.op == kError) return absl::FailedPreconditionError(absl::StrCat("TCP store: ", reply.value));
  if (s.ok()) return std::move(reply.value);
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
    RETURN_IF_ERROR(ReadReply(std::chrono::steady_clock::now() + std::chrono::seconds(10), &reply));
    if (reply.op == kCancelled) break;
    late = std::move(reply.value);
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
