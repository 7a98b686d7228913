// SocketLinks: plain TCP connections between ranks on different hosts, for
// the bulk data of the hierarchical all-reduce's stage between hosts
// (HierExchange). UCX's TCP transport moves a large message as 8 KiB
// fragments through bounce buffers, and only while some thread calls
// ucp_worker_progress; here one I/O thread per communicator sits in poll()
// on the sockets and moves every byte with one send/recv system call per
// socket buffer's worth, straight from and into the caller's memory.
//
// Wire format, per connection and direction: messages in posting order,
// each a 16-byte header (tag, byte count; host order: both ends run on one
// architecture, checked by the hello) followed by the payload. A message goes
// straight into the posted receive with its tag; one that arrives before its
// receive is held (a copy) until it is posted. Nothing is read from a
// connection while no receive is posted on it (the kernel holds the sender
// back). Tags are unique among a pair's messages in flight; a message whose
// length differs from its receive's is an error, never silently truncated.
//
// Set-up (Create): every rank listens on an ephemeral port, publishes
// "<IPv4> <port> <cookie>" through the bootstrap store (the address is the
// one its route to the store server leaves from), then the lower rank of
// each linked pair connects and sends a hello with its rank and the
// acceptor's cookie; the acceptor drops connections that do not present it.
//
// Errors: a connection that closes, resets or breaks the protocol fails the
// whole object with Unavailable naming the peer rank (sticky; status()).
// Requests already posted then never complete: the caller stops (Stop) and
// drops them. Deadlines are the caller's (it polls completions).
//
// Thread model: Send, Recv, failed, status and Stop may be called from any
// thread. Completion counters are decremented (release) by the I/O thread;
// read them with acquire. The I/O thread takes only this object's mutex.
// Ownership: buffers passed to Send/Recv must stay valid until their
// counter has been decremented or Stop has returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "collectives/bootstrap/tcp_store.h"
#include "common/annotated_mutex.h"

namespace athanor {
namespace ucx_internal {

class SocketLinks {
 public:
  // Connects this rank to every rank in `peers` (the relation must be
  // symmetric: r lists p exactly when p lists r). Every rank of the
  // communicator calls it with the same `prefix` (it all-gathers through
  // `store`), also ranks with no peers. `master_addr`/`master_port`: the
  // store server, whose route picks the address this rank publishes.
  // Returns nullptr (no error) when some rank has no IPv4 address to
  // publish or does not `offer` links: every rank then sees the same and
  // keeps UCX for the data. `buffer_bytes`: each socket's send and receive
  // buffer (UcxTuning::socket_buffer_bytes; 0 leaves the kernel's sizing).
  // Errors: the store, or a peer that does not connect or accept within
  // `timeout` (DeadlineExceeded / Unavailable naming it).
  static absl::StatusOr<std::unique_ptr<SocketLinks>> Create(
      TcpStoreClient* store, const std::string& prefix, int rank, int world_size,
      const std::vector<int>& peers, const std::string& master_addr, int master_port,
      std::chrono::milliseconds timeout, bool offer = true, int buffer_bytes = 0);
  ~SocketLinks();  // Stop(), then closes the sockets
  SocketLinks(const SocketLinks&) = delete;
  SocketLinks& operator=(const SocketLinks&) = delete;

  // Queue a message to / a receive from `peer` (one of `peers`); `*done` is
  // decremented once it has been handed to the kernel / has fully arrived.
  // The caller increments `*done` before posting.
  void Send(int peer, uint64_t tag, const void* data, size_t bytes, std::atomic<int>* done);
  void Recv(int peer, uint64_t tag, void* data, size_t bytes, std::atomic<int>* done);

  bool failed() const { return failed_.load(std::memory_order_acquire); }
  absl::Status status() const;
  // Ends the I/O thread; afterwards no buffer is touched again. Idempotent.
  void Stop();
  bool stopped() const { return stopped_; }

 private:
  struct Request {
    uint64_t header[2];  // tag, bytes
    char* data;
    size_t bytes;
    size_t done = 0;  // bytes of header + payload moved
    std::atomic<int>* counter;
  };
  // A message that arrived before its receive was posted.
  struct Held {
    uint64_t tag;
    std::vector<char> data;
    bool complete = false;
  };
  struct Link {
    int peer = -1;
    int fd = -1;
    // Guarded by mu_; the I/O thread uses the elements it took out of them
    // without it (list elements stay put while others come and go).
    std::deque<Request> sends;
    std::list<Request> recvs;
    std::list<Held> held;
    size_t held_bytes = 0;
    bool dead = false;  // failed: no longer polled, its requests never complete
    // I/O thread only: the message being received.
    uint64_t header[2] = {0, 0};
    size_t header_got = 0;
    char* into = nullptr;  // its payload's destination once the header is in
    size_t got = 0;
    std::list<Request>::iterator into_recv;  // ... a posted receive, or
    std::list<Held>::iterator into_held;     // ... a held buffer
    bool into_is_held = false;
  };

  explicit SocketLinks(int buffer_bytes) : buffer_bytes_(buffer_bytes) {}
  absl::Status SetUp(TcpStoreClient* store, const std::string& prefix, int rank, int world_size,
                     const std::vector<int>& peers, const std::string& master_addr,
                     int master_port, std::chrono::milliseconds timeout, bool offer,
                     bool* usable);
  Link* Find(int peer);
  void Post(bool send, int peer, uint64_t tag, const void* data, size_t bytes,
            std::atomic<int>* done);
  void Main();
  // Move what the socket allows; false on a failure (already recorded).
  bool PumpSend(Link* link);
  bool PumpRecv(Link* link);
  bool WantsRead(const Link& link) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLink(Link* link, const std::string& why);
  void FailLocked(Link* link, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int buffer_bytes_;   // SO_SNDBUF/SO_RCVBUF; 0: the kernel's
  std::vector<Link> links_;  // fixed after SetUp
  int wake_fd_ = -1;
  std::thread thread_;
  bool stopped_ = false;  // Stop() ran (callers serialise Stop)
  mutable StdMutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

}  // namespace ucx_internal
}  // namespace athanor
