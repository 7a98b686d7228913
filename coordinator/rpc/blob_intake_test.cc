#include "coordinator/rpc/blob_intake.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/fake_object_store.h"
#include "proto/athanor_data.pb.h"
#include "storage/archive.h"

namespace athanor::coord {
namespace {

// A client stream's remaining pieces, as grpc::ServerReader::Read hands them.
struct Pieces {
  std::vector<rpc::StoreVolumeChunk> chunks;
  size_t next = 0;
  bool Read(rpc::StoreVolumeChunk* out) {
    if (next == chunks.size()) return false;
    *out = chunks[next++];
    return true;
  }
};

std::string DigestOf(const std::string& bytes) {
  storage::Sha256Hasher h;
  h.Update(bytes.data(), bytes.size());
  return h.Finish();
}

Pieces Of(const std::vector<std::string>& data) {
  Pieces p;
  for (const std::string& d : data) p.chunks.emplace_back().set_data(d);
  return p;
}

absl::StatusOr<int64_t> Receive(FakeObjectStore& store, Pieces pieces, int64_t size, const std::string& digest) {
  std::unique_ptr<WritableObject> out = *store.OpenWrite("k", PutMode::kOverwrite);
  absl::StatusOr<int64_t> got = ReceiveBlob<rpc::StoreVolumeChunk>(&pieces, "StoreVolume", size, digest, out.get());
  if (got.ok()) {
    EXPECT_TRUE(out->Close().ok());
  }
  return got;
}

TEST(BlobIntakeTest, StoresWholeCheckedContent) {
  FakeObjectStore store;
  absl::StatusOr<int64_t> got = Receive(store, Of({"hello ", "world"}), 11, DigestOf("hello world"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 11);
  EXPECT_EQ(store.Objects().at("k"), "hello world");
}

TEST(BlobIntakeTest, RefusesWhatDoesNotMatchTheHeader) {
  FakeObjectStore store;
  const std::string piece_error =
      "StoreVolume: a piece after the header holds a header, more than 1048576 bytes, or bytes past size_bytes (5)";
  EXPECT_EQ(Receive(store, Of({"abc", "def"}), 5, DigestOf("abcde")).status().message(), piece_error);
  EXPECT_EQ(Receive(store, Of({std::string((1 << 20) + 1, 'x')}), 5, DigestOf("x")).status().message(),
            piece_error);
  Pieces with_header = Of({"ab"});
  with_header.chunks.emplace_back().mutable_header()->set_volume("v");
  EXPECT_EQ(Receive(store, with_header, 5, DigestOf("abcde")).status().message(), piece_error);
  EXPECT_EQ(Receive(store, Of({"abc"}), 5, DigestOf("abcde")).status().message(),
            "StoreVolume: 3 bytes sent of 5");
  EXPECT_EQ(Receive(store, Of({"abcdf"}), 5, DigestOf("abcde")).status().message(),
            "StoreVolume: the bytes hash to " + DigestOf("abcdf") + ", not " + DigestOf("abcde"));
  EXPECT_TRUE(store.Objects().empty());  // every refused object was aborted
}

TEST(BlobIntakeTest, ChecksDigestSpelling) {
  EXPECT_TRUE(CheckDigest(DigestOf("x")).ok());
  EXPECT_EQ(CheckDigest("sha256:ABC").message(), "digest: not \"sha256:\" and 64 lowercase hex digits");
  EXPECT_EQ(CheckDigest("md5:" + std::string(67, 'a')).message(),
            "digest: not \"sha256:\" and 64 lowercase hex digits");
}

}  // namespace
}  // namespace athanor::coord
