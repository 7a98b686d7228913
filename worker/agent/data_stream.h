// Files moved between this agent and the coordinator as gRPC streams of
// pieces (WorkdirData, NodeData): the channel, the send loop and the receive
// loop that workdir_snapshot.cc, volume_transport.cc and
// image_cache_fetcher.cc share. Every function blocks its caller; none keeps
// state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "security/tls.h"

namespace athanor::agent {

// The bound on a piece's data in both directions (the protos' documented one).
inline constexpr size_t kMaxDataChunk = size_t{1} << 20;

// A channel to the coordinator for data calls (mutual TLS with the node's
// certificate; `tls` nullopt: plaintext), taking messages of up to 4 MiB.
std::shared_ptr<grpc::Channel> CoordinatorDataChannel(const std::string& coordinator,
                                                      const std::optional<security::TlsMaterial>& tls);

// `s` as an absl::Status of the same code, its message after "`what`: ".
absl::Status FromGrpc(const grpc::Status& s, absl::string_view what);

// The file-descriptor steps of the loops below (errors name `path`).
absl::StatusOr<int> OpenToSend(const std::string& path);
absl::StatusOr<int> CreateToReceive(const std::string& path);  // a new file, 0600
absl::StatusOr<size_t> ReadPiece(int fd, std::string* buf, const std::string& path);  // 0: the end
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);
absl::Status CloseFile(int fd, const std::string& path);

// Opens `path`, starts the call with `start(&ctx)` (which returns the
// call's std::unique_ptr<grpc::ClientWriter<Chunk>>; what it fills in must
// outlive this), sends `first`, then the file in pieces of at most
// kMaxDataChunk. A file that does not open starts no call. Returns the read
// error first, else the coordinator's ("the coordinator refused it: ...").
template <typename Chunk, typename Start>
absl::Status SendFile(const std::string& path, std::chrono::system_clock::duration deadline, const Chunk& first,
                      Start start) {
  absl::StatusOr<int> fd = OpenToSend(path);
  if (!fd.ok()) return fd.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  auto writer = start(&ctx);
  absl::Status status;
  bool open_stream = writer->Write(first);
  std::string buf(kMaxDataChunk, '\0');
  while (open_stream && status.ok()) {
    absl::StatusOr<size_t> n = ReadPiece(*fd, &buf, path);
    if (!n.ok()) status = n.status();
    if (!n.ok() || *n == 0) break;
    Chunk piece;
    piece.set_data(buf.data(), *n);
    open_stream = writer->Write(piece);  // false: the coordinator ended the call (Finish says why)
  }
  CloseFile(*fd, path).IgnoreError();  // read only: nothing to lose
  if (!status.ok()) ctx.TryCancel();
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!status.ok()) return status;
  if (!s.ok()) return FromGrpc(s, "the coordinator refused it");
  return absl::OkStatus();
}

// Reads `reader`'s pieces into `fd` until the stream ends or a step fails.
// `check(chunk, total)`, `total` counting the chunk's data, may refuse a
// piece before it is written. Returns the bytes written. The caller cancels
// and finishes the call.
template <typename Chunk, typename Check>
absl::StatusOr<int64_t> ReceivePieces(grpc::ClientReader<Chunk>* reader, int fd, const std::string& path,
                                      Check check) {
  Chunk chunk;
  int64_t total = 0;
  while (reader->Read(&chunk)) {
    total += static_cast<int64_t>(chunk.data().size());
    if (absl::Status s = check(chunk, total); !s.ok()) return s;
    if (absl::Status s = WriteAll(fd, chunk.data(), path); !s.ok()) return s;
  }
  return total;
}

}  // namespace athanor::agent
