#include "worker/train/state_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(StateFileTest, WritesTheCheckpointLibrarysFormatAndReadsBack) {
  const std::string path = ::testing::TempDir() + "/w.safetensors";
  const float a[3] = {1.0f, 2.0f, 3.0f};
  const float b[2] = {-1.5f, 0.25f};
  std::vector<NamedTensor> tensors = {{"a", {3}, a, 3}, {"b.weight", {1, 2}, b, 2}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"step", "20"}}).ok());

  const std::string all = ReadAll(path);
  absl::StatusOr<SafetensorsLayout> layout = ParseSafetensors(all, all.size());
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->data_start % 8, 0u);
  EXPECT_EQ(all.size(), layout->data_start + 20);
  ASSERT_EQ(layout->entries.size(), 2u);
  EXPECT_EQ(layout->entries[0].name, "a");
  EXPECT_EQ(layout->entries[0].begin, 0u);
  EXPECT_EQ(layout->entries[0].end, 12u);
  EXPECT_EQ(layout->entries[1].name, "b.weight");
  EXPECT_EQ(layout->entries[1].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(layout->entries[1].begin, 12u);
  EXPECT_EQ(layout->entries[1].end, 20u);
  EXPECT_EQ(layout->metadata.at("step"), "20");

  std::map<std::string, std::vector<float>> back;
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(ReadSafetensors(path, &back, &meta).ok());
  EXPECT_EQ(back["a"], (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(back["b.weight"], (std::vector<float>{-1.5f, 0.25f}));
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"step", "20"}}));
  std::remove(path.c_str());
}

TEST(StateFileTest, ErrorsCarryTheCause) {
  EXPECT_EQ(WriteSafetensors("/nonexistent-dir/x.safetensors", {}, {}).code(),
            absl::StatusCode::kNotFound);
  std::map<std::string, std::vector<float>> back;
  EXPECT_EQ(ReadSafetensors("/nonexistent-dir/x.safetensors", &back).code(),
            absl::StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/bad.safetensors";
  std::ofstream(path, std::ios::binary) << std::string("\x09\0\0\0\0\0\0\0{not json", 17);
  EXPECT_EQ(ReadSafetensors(path, &back).code(), absl::StatusCode::kDataLoss);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace athanor
