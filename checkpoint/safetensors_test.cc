#include "checkpoint/safetensors.h"

#include <cstdio>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "checkpoint/manifest.h"
#include "common/subprocess.h"

namespace athanor {
namespace {

TEST(Safetensors, PlanLaysTensorsOutContiguouslyWithAnAlignedHeader) {
  float a[6] = {1, 2, 3, 4, 5, 6};
  int64_t b[1] = {42};
  std::vector<TensorRef> tensors = {{"w", TensorDType::kF32, {2, 3}, a, sizeof(a), {}},
                                    {"step", TensorDType::kI64, {}, b, sizeof(b), {}}};
  auto layout = PlanSafetensors(tensors, {{"rng_state", "abc"}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->header.size() % 8, 0u);
  EXPECT_EQ(layout->data_start, layout->header.size());
  EXPECT_EQ(layout->total_size, layout->data_start + 32);
  ASSERT_EQ(layout->entries.size(), 2u);
  EXPECT_EQ(layout->entries[0].begin, 0u);
  EXPECT_EQ(layout->entries[0].end, 24u);
  EXPECT_EQ(layout->entries[1].begin, 24u);
  EXPECT_EQ(layout->entries[1].end, 32u);

  std::string file = layout->header + std::string(reinterpret_cast<char*>(a), sizeof(a)) +
                     std::string(reinterpret_cast<char*>(b), sizeof(b));
  auto parsed = ParseSafetensors(file, file.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->metadata.at("rng_state"), "abc");
  ASSERT_EQ(parsed->entries.size(), 2u);
  EXPECT_EQ(parsed->entries[0].name, "w");
  EXPECT_EQ(parsed->entries[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(parsed->entries[1].name, "step");
  EXPECT_EQ(parsed->entries[1].dtype, TensorDType::kI64);
  EXPECT_TRUE(parsed->entries[1].shape.empty());
}

TEST(Safetensors, ParseRejectsMalformedFiles) {
  EXPECT_EQ(ParseSafetensors("abc", 3).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_len("\xff\xff\xff\xff\xff\xff\x00\x00", 8);
  EXPECT_EQ(ParseSafetensors(bad_len, 8).status().code(), absl::StatusCode::kDataLoss);
  std::string header = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header + std::string(8, '\0');
  auto parsed = ParseSafetensors(file, file.size());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);  // 4 floats need 16 bytes
  EXPECT_NE(parsed.status().message().find("'x'"), absl::string_view::npos);
}

// An independent reader: Python's json + struct, as any safetensors user would.
TEST(Safetensors, AnIndependentPythonReaderOpensTheFile) {
  float a[4] = {1.5f, -2, 3, 4};
  std::vector<TensorRef> tensors = {{"layer.weight", TensorDType::kF32, {2, 2}, a, sizeof(a), {}}};
  auto layout = PlanSafetensors(tensors, {{"step", "7"}});
  ASSERT_TRUE(layout.ok());
  std::string path = ::testing::TempDir() + "/independent.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << layout->header;
    out.write(reinterpret_cast<char*>(a), sizeof(a));
  }
  const char* script =
      "import json,struct,sys\n"
      "d=open(sys.argv[1],'rb').read()\n"
      "n=struct.unpack('<Q',d[:8])[0]\n"
      "assert (8+n)%8==0\n"
      "h=json.loads(d[8:8+n])\n"
      "t=h['layer.weight']; b,e=t['data_offsets']\n"
      "v=struct.unpack('<4f',d[8+n+b:8+n+e])\n"
      "print(h['__metadata__']['step'],t['dtype'],t['shape'],v)\n";
  SubprocessOptions options;
  options.argv = {"python3", "-c", script, path};
  options.capture_stdout = true;
  auto child = Subprocess::Start(options);
  ASSERT_TRUE(child.ok()) << "python3 (installed by scripts/install-deps): " << child.status();
  std::string out = (*child)->ReadAllStdout();
  ExitInfo exit = (*child)->Wait();
  EXPECT_EQ(exit.exit_code, 0) << out;
  EXPECT_EQ(out, "7 F32 [2, 2] (1.5, -2.0, 3.0, 4.0)\n");
}

TEST(Manifest, RoundTripsAndRejectsGarbage) {
  RankManifest m;
  m.job = "j";
  m.step = 5;
  m.rank = 1;
  m.world_size = 2;
  m.shard_key = "j/step-0000000005/rank-00001-of-00002.safetensors";
  m.shard_size = 1234;
  m.shard_crc32c = 0xdeadbeef;
  m.tensors.push_back(ManifestTensor{"opt", TensorDType::kBF16, {3, 4}, 96, 24, 77, ShardSpec{3, 6}});
  m.metadata = {{"data_cursor", "99"}};
  auto back = DecodeManifest(EncodeManifest(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shard_crc32c, 0xdeadbeefu);
  ASSERT_EQ(back->tensors.size(), 1u);
  EXPECT_EQ(back->tensors[0].dtype, TensorDType::kBF16);
  EXPECT_EQ(back->tensors[0].shard.dim0_offset, 3);
  EXPECT_EQ(back->tensors[0].shard.dim0_total, 6);
  EXPECT_EQ(back->metadata.at("data_cursor"), "99");
  EXPECT_EQ(DecodeManifest("{}").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeManifest("not json").status().code(), absl::StatusCode::kDataLoss);

  CommitRecord c{"j", 5, 2, 1700000000, {{0, "a", 10, 1, "ma"}, {1, "b", 20, 2, "mb"}}};
  auto cb = DecodeCommit(EncodeCommit(c));
  ASSERT_TRUE(cb.ok()) << cb.status();
  EXPECT_EQ(cb->TotalBytes(), 30u);
  EXPECT_EQ(cb->shards[1].key, "b");
  c.world_size = 3;
  EXPECT_EQ(DecodeCommit(EncodeCommit(c)).status().code(), absl::StatusCode::kDataLoss);
}

// A file whose header is `json` followed by `data_bytes` zero bytes.
std::string FileWithHeader(const std::string& json, size_t data_bytes) {
  std::string file(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return file + json + std::string(data_bytes, '\0');
}

TEST(Safetensors, AnElementCountThatWrapsIsRejected) {
  // 2^32 * 2^32 elements wrap to 0 in 64 bits, matching an empty range.
  std::string file = FileWithHeader(
      R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  auto parsed = ParseSafetensors(file, file.size());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
  EXPECT_NE(parsed.status().message().find("'x'"), absl::string_view::npos) << parsed.status();
}

TEST(Safetensors, ADimensionPastInt64IsRejected) {
  // 2^63 is unsigned in JSON but negative as int64; times 0 it matches [0,0).
  std::string file = FileWithHeader(
      R"({"x":{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}})", 0);
  auto parsed = ParseSafetensors(file, file.size());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
}

TEST(Safetensors, OverlappingDataRangesAreRejected) {
  std::string file = FileWithHeader(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  auto parsed = ParseSafetensors(file, file.size());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
  EXPECT_NE(parsed.status().message().find("overlap"), absl::string_view::npos) << parsed.status();
}

TEST(Manifest, RejectsTensorsThatDisagreeWithTheirShard) {
  RankManifest m;
  m.job = "j";
  m.world_size = 1;
  m.shard_key = "s";
  m.shard_size = 100;
  m.tensors.push_back(ManifestTensor{"w", TensorDType::kF32, {2, 3}, 8, 24, 0, {}});
  ASSERT_TRUE(DecodeManifest(EncodeManifest(m)).ok());
  auto with = [&](const std::function<void(ManifestTensor*)>& change) {
    RankManifest bad = m;
    change(&bad.tensors[0]);
    return DecodeManifest(EncodeManifest(bad)).status();
  };
  EXPECT_EQ(with([](ManifestTensor* t) { t->bytes = 20; }).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with([](ManifestTensor* t) { t->offset = 90; }).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with([](ManifestTensor* t) { t->shape = {-2, -3}; }).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with([](ManifestTensor* t) { t->shard = ShardSpec{5, 6}; }).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(with([](ManifestTensor* t) { t->shard = ShardSpec{-1, 6}; }).code(), absl::StatusCode::kDataLoss);
  absl::Status s = with([](ManifestTensor* t) { t->offset = ~uint64_t{0} - 4; });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("'w'"), absl::string_view::npos) << s;
}

TEST(Manifest, NumbersOutOfRangeAreRejectedNotConverted) {
  RankManifest m;
  m.job = "j";
  m.world_size = 1;
  m.shard_key = "s";
  std::string text = EncodeManifest(m);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  // A float far past int64 (undefined to convert), and an int past `int`.
  EXPECT_EQ(DecodeManifest(replace("\"step\": 0", "\"step\": 1e300")).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeManifest(replace("\"rank\": 0", "\"rank\": 4294967296")).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeManifest(replace("\"size\": 0", "\"size\": -1")).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(Manifest, ACommitWithNoShardsOrMisnumberedShardsIsRejected) {
  CommitRecord empty{"j", 5, 0, 1700000000, {}};
  EXPECT_EQ(DecodeCommit(EncodeCommit(empty)).status().code(), absl::StatusCode::kDataLoss);
  CommitRecord swapped{"j", 5, 2, 1700000000, {{1, "b", 20, 2, "mb"}, {0, "a", 10, 1, "ma"}}};
  EXPECT_EQ(DecodeCommit(EncodeCommit(swapped)).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace athanor
