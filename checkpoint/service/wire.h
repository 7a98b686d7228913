// The rank <-> node checkpoint service wire: length-prefixed frames over a
// unix stream socket, each carrying one JSON object and optionally one file
// descriptor (SCM_RIGHTS, attached to the frame's first byte).
//
//   frame = u32 little-endian N, then N bytes of JSON (N <= kMaxFrameBytes)
//
// Requests (rank -> service) and replies, one reply per request:
//   {"op":"stage", "job", "attempt", "rank", "world_size", "step", "bytes",
//    "wait": bool, "uri", "keep_last", "env": {AWS_*}}
//       -> {"ok":true, "area": id, "capacity": n} + the area's fd
//        | {"ok":false, "skip":true, "reason"}      (busy or over budget, wait=false)
//        | {"ok":false, "error"}
//   {"op":"handoff", "manifest": <rank manifest JSON, CRCs zero>}
//       -> {"ok":true} once the service owns the bytes | {"ok":false, "error"}
//   {"op":"status"} -> {"ok":true, "busy": bool}
//
// Blocking calls; a socket is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace athanor::ckptsvc {

inline constexpr size_t kMaxFrameBytes = 64 << 20;

// Sends `msg`, with `fd` attached when >= 0 (the caller keeps its fd).
absl::Status SendFrame(int sock, const nlohmann::json& msg, int fd = -1);

struct Frame {
  nlohmann::json msg;
  int fd = -1;  // owned by the caller when >= 0
};
// Unavailable on EOF before a frame ("peer closed"); DataLoss for an
// oversized or non-JSON frame. A received fd is closed on error.
absl::StatusOr<Frame> RecvFrame(int sock);

// Connects to the service's socket; Unavailable naming the path.
absl::StatusOr<int> ConnectService(const std::string& socket_path);
// Listens on a fresh socket at `socket_path` (an old one is removed), with
// `mode` applied to the socket file.
absl::StatusOr<int> ListenService(const std::string& socket_path, unsigned mode);

}  // namespace athanor::ckptsvc
