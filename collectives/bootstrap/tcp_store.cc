#include "collectives/bootstrap/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
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
#include "common/status.h"

namespace athanor {
namespace {

// Wire format, both ways: op (1 byte), key length (u32), key, value length
// (u32), value. Replies use op 'R' and an empty key.
// A Get that timed out is withdrawn with kCancel; the server answers
// kCancelled after the value reply, if it sent one, so the connection stays in step.
constexpr char kSet = 'S', kGet = 'G', kAdd = 'A', kCheck = 'C', kCancel = 'X', kReply = 'R',
               kCancelled = 'Z', kHello = 'H';
// Bytes an unauthenticated client may send before its hello is complete.
constexpr size_t kMaxHelloBytes = 9 + 1024;

// Compares in time independent of where the strings differ.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string Encode(char op, const std::string& key, const std::string& value) {
  std::string out(1, op);
  uint32_t n = key.size();
  out.append(reinterpret_cast<const char*>(&n), 4).append(key);
  n = value.size();
  out.append(reinterpret_cast<const char*>(&n), 4).append(value);
  return out;
}

// Parses one message from the front of `buf`; false if incomplete.
bool Decode(std::string* buf, char* op, std::string* key, std::string* value) {
  if (buf->size() < 5) return false;
  uint32_t klen, vlen;
  std::memcpy(&klen, buf->data() + 1, 4);
  if (buf->size() < 9 + klen) return false;
  std::memcpy(&vlen, buf->data() + 5 + klen, 4);
  if (buf->size() < 9 + klen + vlen) return false;
  *op = (*buf)[0];
  *key = buf->substr(5, klen);
  *value = buf->substr(9 + klen, vlen);
  buf->erase(0, 9 + klen + vlen);
  return true;
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

absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
  }
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

void TcpStoreServer::Run() {
  std::map<std::string, std::string> data;
  std::map<int, std::string> inbox;                   // client fd -> unparsed bytes
  std::multimap<std::string, int> waiting;            // key -> fds waiting in Get
  std::set<int> admitted;                             // fds that presented the secret
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
      auto hang_up = [&] {
        for (auto it = waiting.begin(); it != waiting.end();) {
          it = it->second == fd ? waiting.erase(it) : std::next(it);
        }
        inbox.erase(fd);
        admitted.erase(fd);
        close(fd);
      };
      if (n <= 0) {
        hang_up();
        continue;
      }
      std::string& in = inbox[fd];
      in.append(buf, n);
      const bool must_hello = !secret_.empty() && !admitted.count(fd);
      if (must_hello && in.size() > kMaxHelloBytes) {
        hang_up();  // no hello this long: not one of ours
        continue;
      }
      char op;
      std::string key, value;
      bool dropped = false;
      while (!dropped && Decode(&in, &op, &key, &value)) {
        if (!secret_.empty() && !admitted.count(fd)) {
          if (op != kHello || !SameSecret(value, secret_)) {
            hang_up();
            dropped = true;
            break;
          }
          admitted.insert(fd);
          WriteAll(fd, Encode(kReply, "", ""));
          continue;
        }
        if (op == kHello) {
          WriteAll(fd, Encode(kReply, "", ""));
        } else if (op == kSet) {
          data[key] = value;
          WriteAll(fd, Encode(kReply, "", ""));
          auto [lo, hi] = waiting.equal_range(key);
          for (auto it = lo; it != hi; ++it) WriteAll(it->second, Encode(kReply, "", value));
          waiting.erase(lo, hi);
        } else if (op == kGet) {
          auto it = data.find(key);
          if (it != data.end()) {
            WriteAll(fd, Encode(kReply, "", it->second));
          } else {
            waiting.emplace(key, fd);
          }
        } else if (op == kAdd) {
          int64_t delta = 0, current = 0;
          std::memcpy(&delta, value.data(), std::min<size_t>(8, value.size()));
          auto it = data.find(key);
          if (it != data.end()) std::memcpy(&current, it->second.data(), 8);
          current += delta;
          data[key] = std::string(reinterpret_cast<const char*>(&current), 8);
          WriteAll(fd, Encode(kReply, "", data[key]));
        } else if (op == kCancel) {
          auto [lo, hi] = waiting.equal_range(key);
          for (auto it = lo; it != hi;) it = it->second == fd ? waiting.erase(it) : std::next(it);
          WriteAll(fd, Encode(kCancelled, "", ""));
        } else if (op == kCheck) {
          WriteAll(fd, Encode(kReply, "", data.count(key) ? "1" : "0"));
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

TcpStoreClient::~TcpStoreClient() { close(fd_); }

absl::Status TcpStoreClient::ReadReply(std::chrono::steady_clock::time_point deadline, char* op,
                                       std::string* value) {
  std::string key;
  while (!Decode(&inbox_, op, &key, value)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    int r = left.count() > 0 ? poll(&p, 1, left.count()) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return absl::DeadlineExceededError("no reply");
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      close(fd_);
      fd_ = -1;
      return absl::UnavailableError("TCP store: server closed the connection");
    }
    inbox_.append(buf, n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreClient::Call(char op, const std::string& key,
                                                 const std::string& value,
                                                 std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return absl::UnavailableError("TCP store connection is broken");
  if (!WriteAll(fd_, Encode(op, key, value))) {
    return absl::UnavailableError(absl::StrCat("TCP store: send failed: ", strerror(errno)));
  }
  char rop;
  std::string reply;
  absl::Status s = ReadReply(std::chrono::steady_clock::now() + timeout, &rop, &reply);
  if (s.ok()) return reply;
  if (!absl::IsDeadlineExceeded(s)) return s;
  const auto timed_out = absl::DeadlineExceededError(
      absl::StrCat("TCP store: key '", key, "' not available within ", timeout.count(), " ms"));
  if (op != kGet) {
    close(fd_);
    fd_ = -1;
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
  int64_t out = 0;
  std::memcpy(&out, v.data(), std::min<size_t>(8, v.size()));
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
