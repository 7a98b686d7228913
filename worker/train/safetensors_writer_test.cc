#include "worker/train/safetensors_writer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(SafetensorsWriterTest, WritesHeaderThenDataAndReadsBack) {
  const std::string path = ::testing::TempDir() + "/w.safetensors";
  const float a[3] = {1.0f, 2.0f, 3.0f};
  const float b[2] = {-1.5f, 0.25f};
  std::vector<NamedTensor> tensors = {{"a", {3}, a, 3}, {"b.weight", {1, 2}, b, 2}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"step", "20"}}).ok());

  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(all[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(all.size(), 8 + n + 20);
  const std::string header = all.substr(8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
            R"("b.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[12,20]},)"
            R"("__metadata__":{"step":"20"}})");

  std::map<std::string, std::vector<float>> back;
  ASSERT_TRUE(ReadSafetensors(path, &back).ok());
  EXPECT_EQ(back["a"], (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(back["b.weight"], (std::vector<float>{-1.5f, 0.25f}));
  std::remove(path.c_str());
}

TEST(SafetensorsWriterTest, ErrorsCarryTheCause) {
  EXPECT_EQ(WriteSafetensors("/nonexistent-dir/x.safetensors", {}, {}).code(),
            absl::StatusCode::kNotFound);
  std::map<std::string, std::vector<float>> back;
  EXPECT_EQ(ReadSafetensors("/nonexistent-dir/x.safetensors", &back).code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace athanor
