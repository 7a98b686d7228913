#include "collectives/ucx/socket_links.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {
namespace {

// Messages held for receives not yet posted, per connection, at most.
constexpr size_t kMaxHeldBytes = size_t{1} << 30;
constexpr uint64_t kHelloMagic = 0x61746e726c696e6bull;  // "atnrlink"

struct Hello {
  uint64_t magic;
  uint64_t rank;
  uint64_t cookie;  // the acceptor's, as published
};

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// The IPv4 address this host's route to host:port leaves from (a connected
// UDP socket sends nothing). Empty when there is none.
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return "";
  }
  std::string out;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) out = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return out;
}

// Blocking read/write of exactly `n` bytes, each wait bounded by `deadline`.
bool IoExactly(int fd, bool write_side, void* buf, size_t n,
               std::chrono::steady_clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, static_cast<short>(write_side ? POLLOUT : POLLIN), 0};
    if (poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    ssize_t k = write_side ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// buffer_bytes: SO_SNDBUF/SO_RCVBUF (UcxTuning::socket_buffer_bytes); 0 keeps
// the kernel's autotuning.
void Tune(int fd, int buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketLinks>> SocketLinks::Create(
    TcpStoreClient* store, const std::string& prefix, int rank, int world_size,
    const std::vector<int>& peers, const std::string& master_addr, int master_port,
    std::chrono::milliseconds timeout, bool offer, int buffer_bytes) {
  std::unique_ptr<SocketLinks> links(new SocketLinks(buffer_bytes));
  bool usable = false;
  RETURN_IF_ERROR(links->SetUp(store, prefix, rank, world_size, peers, master_addr, master_port,
                               timeout, offer, &usable));
  if (!usable) return std::unique_ptr<SocketLinks>();
  links->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (links->wake_fd_ < 0) return absl::InternalError(Errno("eventfd"));
  links->thread_ = std::thread([p = links.get()] { p->Main(); });
  return links;
}

absl::Status SocketLinks::SetUp(TcpStoreClient* store, const std::string& prefix, int rank,
                                int world_size, const std::vector<int>& peers,
                                const std::string& master_addr, int master_port,
                                std::chrono::milliseconds timeout, bool offer, bool* usable) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Listen first, so peers that connect before we accept wait in the backlog.
  std::string mine = "none";
  const std::string ip = offer ? LocalAddressTowards(master_addr, master_port) : "";
  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  uint64_t cookie = 0;
  if (!ip.empty() && listen_fd >= 0 &&
      bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      listen(listen_fd, 64) == 0 &&
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    std::random_device rd;
    cookie = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    mine = absl::StrCat(ip, " ", ntohs(addr.sin_port), " ", cookie);
  }
  auto all = AllGatherThroughStore(store, prefix, rank, world_size, mine, timeout);
  if (!all.ok()) {
    if (listen_fd >= 0) close(listen_fd);
    return all.status();
  }
  *usable = std::none_of(all->begin(), all->end(), [](const std::string& s) { return s == "none"; });
  if (!*usable) {
    if (listen_fd >= 0) close(listen_fd);
    return absl::OkStatus();
  }
  for (int p : peers) links_.push_back(Link{.peer = p});
  absl::Status status;
  // Connect to the higher peers.
  for (Link& l : links_) {
    if (l.peer < rank || !status.ok()) continue;
    std::vector<std::string> f = absl::StrSplit((*all)[l.peer], ' ');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(std::atoi(f.size() == 3 ? f[1].c_str() : "0")));
    const bool parsed = f.size() == 3 && inet_pton(AF_INET, f[0].c_str(), &to.sin_addr) == 1;
    Hello hello{kHelloMagic, static_cast<uint64_t>(rank),
                parsed ? std::strtoull(f[2].c_str(), nullptr, 10) : 0};
    l.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l.fd >= 0) {
      // Bounds connect() too (Linux applies the send timeout to it).
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      timeval tv{};
      tv.tv_sec = std::max<int64_t>(1, left.count() / 1000);
      setsockopt(l.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (!parsed || l.fd < 0 ||
        connect(l.fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
        !IoExactly(l.fd, true, &hello, sizeof(hello), deadline)) {
      status = absl::UnavailableError(absl::StrCat("ucx: cannot connect to rank ", l.peer, " at '",
                                                   (*all)[l.peer], "' between hosts: ",
                                                   std::strerror(errno)));
    }
  }
  // Accept the lower ones; a connection without our cookie is dropped.
  int waiting = static_cast<int>(std::count_if(links_.begin(), links_.end(),
                                               [&](const Link& l) { return l.peer < rank; }));
  while (status.ok() && waiting > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (const Link& l : links_) {
        if (l.peer < rank && l.fd < 0) absl::StrAppend(&missing, missing.empty() ? "" : ", ", l.peer);
      }
      status = absl::DeadlineExceededError(
          absl::StrCat("ucx: ranks ", missing, " did not connect to rank ", rank, " between hosts"));
      break;
    }
    pollfd pfd{listen_fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello{};
    Link* link = nullptr;
    if (IoExactly(fd, false, &hello, sizeof(hello),
                  std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5))) &&
        hello.magic == kHelloMagic && hello.cookie == cookie && hello.rank < 1u << 30) {
      link = Find(static_cast<int>(hello.rank));
    }
    if (link == nullptr || link->peer >= rank || link->fd >= 0) {
      ATHANOR_LOG(WARNING) << "ucx: rank " << rank << ": dropped a connection between hosts "
                           << "without a valid hello";
      close(fd);
      continue;
    }
    link->fd = fd;
    --waiting;
  }
  close(listen_fd);
  for (Link& l : links_) {
    if (l.fd >= 0) Tune(l.fd, buffer_bytes_);
  }
  return status;
}

SocketLinks::Link* SocketLinks::Find(int peer) {
  for (Link& l : links_) {
    if (l.peer == peer) return &l;
  }
  return nullptr;
}

SocketLinks::~SocketLinks() {
  Stop();
  for (Link& l : links_) {
    if (l.fd >= 0) close(l.fd);
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

void SocketLinks::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    StdMutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
}

absl::Status SocketLinks::status() const {
  StdMutexLock lock(&mu_);
  return status_;
}

void SocketLinks::Send(int peer, uint64_t tag, const void* data, size_t bytes,
                       std::atomic<int>* done) {
  Post(true, peer, tag, data, bytes, done);
}

void SocketLinks::Recv(int peer, uint64_t tag, void* data, size_t bytes, std::atomic<int>* done) {
  Post(false, peer, tag, data, bytes, done);
}

void SocketLinks::Post(bool send, int peer, uint64_t tag, const void* data, size_t bytes,
                       std::atomic<int>* done) {
  Link* link = Find(peer);
  StdMutexLock lock(&mu_);
  if (link == nullptr) {
    if (status_.ok()) {
      status_ = absl::InternalError(absl::StrCat("ucx: no connection to rank ", peer));
      failed_.store(true, std::memory_order_release);
    }
    return;
  }
  Request req{{tag, bytes}, const_cast<char*>(static_cast<const char*>(data)), bytes, 0, done};
  if (send) {
    link->sends.push_back(req);
  } else {
    // Arrived already?
    for (auto it = link->held.begin(); it != link->held.end(); ++it) {
      if (it->tag != tag || !it->complete) continue;
      if (it->data.size() != bytes) {
        FailLocked(link, absl::StrCat("sent ", it->data.size(), " B with tag ", tag, " where ",
                                      bytes, " B were expected"));
        return;
      }
      std::memcpy(const_cast<void*>(data), it->data.data(), bytes);
      link->held_bytes -= bytes;
      link->held.erase(it);
      done->fetch_sub(1, std::memory_order_release);
      return;
    }
    link->recvs.push_back(req);
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void SocketLinks::FailLink(Link* link, const std::string& why) {
  StdMutexLock lock(&mu_);
  FailLocked(link, why);
}

void SocketLinks::FailLocked(Link* link, const std::string& why) {
  if (status_.ok()) {
    status_ = absl::UnavailableError(absl::StrCat("ucx: peer rank ", link->peer,
                                                  " failed or is unreachable (", why, ")"));
    failed_.store(true, std::memory_order_release);
  }
  // Nothing more moves on it, and it is not polled again. Its requests stay
  // where they are (the I/O thread may be filling one) until the destructor;
  // the socket stays open too: a peer sees its neighbours go only when they
  // exit, so it names the rank that actually died.
  link->dead = true;
}

bool SocketLinks::PumpSend(Link* link) {
  for (;;) {
    Request* req;
    {
      StdMutexLock lock(&mu_);
      if (link->dead) return false;
      if (link->sends.empty()) return true;
      req = &link->sends.front();
    }
    const size_t total = sizeof(req->header) + req->bytes;
    while (req->done < total) {
      iovec iov[2];
      int n = 0;
      if (req->done < sizeof(req->header)) {
        iov[n++] = {reinterpret_cast<char*>(req->header) + req->done,
                    sizeof(req->header) - req->done};
      }
      const size_t off = req->done > sizeof(req->header) ? req->done - sizeof(req->header) : 0;
      if (off < req->bytes) iov[n++] = {req->data + off, req->bytes - off};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      ssize_t k = sendmsg(link->fd, &msg, MSG_NOSIGNAL);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (k <= 0) {
        FailLink(link, k == 0 ? "connection between hosts closed" : Errno("send"));
        return false;
      }
      req->done += static_cast<size_t>(k);
    }
    std::atomic<int>* counter = req->counter;
    {
      StdMutexLock lock(&mu_);
      if (link->dead) return false;
      link->sends.pop_front();
    }
    counter->fetch_sub(1, std::memory_order_release);
  }
}

bool SocketLinks::WantsRead(const Link& link) const {
  return !link.recvs.empty() || link.header_got > 0 || link.into != nullptr;
}

bool SocketLinks::PumpRecv(Link* link) {
  for (;;) {
    if (link->into == nullptr) {
      {
        StdMutexLock lock(&mu_);
        if (link->dead) return false;
        if (!WantsRead(*link)) return true;
      }
      ssize_t k = recv(link->fd, reinterpret_cast<char*>(link->header) + link->header_got,
                       sizeof(link->header) - link->header_got, 0);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (k <= 0) {
        FailLink(link, k == 0 ? "connection between hosts closed" : Errno("recv"));
        return false;
      }
      link->header_got += static_cast<size_t>(k);
      if (link->header_got < sizeof(link->header)) return true;
      const uint64_t tag = link->header[0], bytes = link->header[1];
      StdMutexLock lock(&mu_);
      if (link->dead) return false;
      auto it = std::find_if(link->recvs.begin(), link->recvs.end(),
                             [&](const Request& r) { return r.header[0] == tag; });
      if (it != link->recvs.end()) {
        if (it->bytes != bytes) {
          FailLocked(link, absl::StrCat("sent ", bytes, " B with tag ", tag, " where ", it->bytes,
                                        " B were expected"));
          return false;
        }
        link->into_recv = it;
        link->into_is_held = false;
        link->into = it->data;
      } else {
        if (bytes > kMaxHeldBytes - link->held_bytes) {
          FailLocked(link, absl::StrCat("sent more than ", kMaxHeldBytes,
                                        " B nobody asked for yet"));
          return false;
        }
        link->held.push_back(Held{tag, std::vector<char>(bytes)});
        link->held_bytes += bytes;
        link->into_held = std::prev(link->held.end());
        link->into_is_held = true;
        link->into = link->into_held->data.data();
      }
      link->got = 0;
      link->header_got = 0;
    }
    const size_t want = link->header[1];
    while (link->got < want) {
      ssize_t k = recv(link->fd, link->into + link->got, want - link->got, 0);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      if (k <= 0) {
        FailLink(link, k == 0 ? "connection between hosts closed" : Errno("recv"));
        return false;
      }
      link->got += static_cast<size_t>(k);
    }
    std::atomic<int>* counter = nullptr;
    {
      StdMutexLock lock(&mu_);
      if (link->dead) return false;
      link->into = nullptr;
      if (!link->into_is_held) {
        counter = link->into_recv->counter;
        link->recvs.erase(link->into_recv);
      } else {
        // Its receive may have been posted meanwhile.
        Held& h = *link->into_held;
        h.complete = true;
        auto it = std::find_if(link->recvs.begin(), link->recvs.end(),
                               [&](const Request& r) { return r.header[0] == h.tag; });
        if (it != link->recvs.end()) {
          if (it->bytes != h.data.size()) {
            FailLocked(link, absl::StrCat("sent ", h.data.size(), " B with tag ", h.tag, " where ",
                                          it->bytes, " B were expected"));
            return false;
          }
          std::memcpy(it->data, h.data.data(), h.data.size());
          counter = it->counter;
          link->recvs.erase(it);
          link->held_bytes -= h.data.size();
          link->held.erase(link->into_held);
        }
      }
    }
    if (counter != nullptr) counter->fetch_sub(1, std::memory_order_release);
  }
}

void SocketLinks::Main() {
  std::vector<pollfd> fds;
  std::vector<Link*> by_fd;
  for (;;) {
    fds.clear();
    by_fd.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    by_fd.push_back(nullptr);
    {
      StdMutexLock lock(&mu_);
      if (stop_) return;
      for (Link& l : links_) {
        if (l.fd < 0 || l.dead) continue;
        // Always watch for the peer going away; read only when a receive
        // is posted (the rest waits in the kernel, which holds the sender).
        short events = POLLRDHUP;
        if (WantsRead(l)) events |= POLLIN;
        if (!l.sends.empty()) events |= POLLOUT;
        fds.push_back({l.fd, events, 0});
        by_fd.push_back(&l);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      ATHANOR_LOG(ERROR) << "ucx: socket links poll: " << std::strerror(errno);
    }
    if (fds[0].revents != 0) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Link* l = by_fd[i];
      const short re = fds[i].revents;
      if (re == 0) continue;
      if ((re & POLLOUT) && !PumpSend(l)) continue;
      if ((re & POLLIN) && !PumpRecv(l)) continue;
      if (re & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) {
        // Data still buffered ahead of the close is read above once its
        // receive is posted; with none posted, the peer is gone.
        bool pending_recv;
        {
          StdMutexLock lock(&mu_);
          pending_recv = WantsRead(*l);
        }
        if (!pending_recv || (re & (POLLERR | POLLNVAL))) {
          FailLink(l, "connection between hosts closed");
        }
      }
    }
  }
}

}  // namespace ucx_internal
}  // namespace athanor
