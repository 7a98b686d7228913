// BlobIntake: the pieces of a client stream after its header, appended to a
// data-store object and checked as they come (used by WorkdirData.StoreWorkdir
// and NodeData.StoreVolume): no piece holds a header or more than
// kDataChunkBytes, no byte passes the announced size, and at the end the
// length and sha256 are the announced ones.
//
// Not thread-safe: one call's handler owns it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/object_store.h"
#include "storage/archive.h"

namespace athanor::coord {

// A header's digest: "sha256:" and 64 lowercase hex digits (InvalidArgument
// naming "digest" otherwise).
absl::Status CheckDigest(const std::string& digest);

class BlobIntake {
 public:
  // `method` prefixes every error ("StoreVolume"); `out` outlives this.
  BlobIntake(const char* method, int64_t size_bytes, std::string digest, WritableObject* out)
      : method_(method), size_bytes_(size_bytes), digest_(std::move(digest)), out_(out) {}

  // One piece after the header.
  absl::Status Take(bool has_header, const std::string& data);
  // The stream ended: the length and digest match. Does not close `out`.
  absl::Status Finish();
  int64_t got() const { return got_; }

 private:
  const char* const method_;
  const int64_t size_bytes_;
  const std::string digest_;
  WritableObject* const out_;
  storage::Sha256Hasher hash_;
  int64_t got_ = 0;
};

// Reads `reader`'s remaining pieces (a Chunk has has_header() and data())
// into `out`. On an error `out` is aborted; on success it is left open for
// the caller to Close. Returns the bytes stored.
template <typename Chunk, typename Reader>
absl::StatusOr<int64_t> ReceiveBlob(Reader* reader, const char* method, int64_t size_bytes,
                                    const std::string& digest, WritableObject* out) {
  BlobIntake intake(method, size_bytes, digest, out);
  Chunk chunk;
  absl::Status status;
  while (status.ok() && reader->Read(&chunk)) status = intake.Take(chunk.has_header(), chunk.data());
  if (status.ok()) status = intake.Finish();
  if (!status.ok()) {
    out->Abort();
    return status;
  }
  return intake.got();
}

}  // namespace athanor::coord
