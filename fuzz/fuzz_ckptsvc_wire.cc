// Fuzzes what the node checkpoint service reads from a rank: the bytes go
// through a unix socket pair into RecvFrame (length prefix, JSON), and every
// frame that parses is checked as a stage request. A request that passes must
// satisfy the invariants the service relies on before it allocates anything.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "checkpoint/service/stage_request.h"
#include "checkpoint/service/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  // Inputs beyond the socket buffer would block the writer: keep them small.
  if (size > 64 * 1024) size = 64 * 1024;
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fds[1], data + off, size - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(fds[1]);
  constexpr uint64_t kBudget = 1 << 20;
  for (;;) {
    absl::StatusOr<athanor::ckptsvc::Frame> frame = athanor::ckptsvc::RecvFrame(fds[0]);
    if (!frame.ok()) break;
    if (frame->fd >= 0) close(frame->fd);
    auto req = athanor::ckptsvc::ParseStageRequest(frame->msg, kBudget);
    if (req.ok() && (req->rank < 0 || req->rank >= req->world_size || req->bytes == 0 ||
                     req->bytes > kBudget || req->job.empty() || req->uri.empty() ||
                     req->env.size() > 32)) {
      __builtin_trap();
    }
  }
  close(fds[0]);
  return 0;
}
