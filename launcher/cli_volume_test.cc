#include <gtest/gtest.h>

#include "launcher/cli_volume.h"

namespace athanor::cli {
namespace {

TEST(CliVolume, ParsesSizes) {
  EXPECT_EQ(*ParseSize("--size", "1048576"), 1048576);
  EXPECT_EQ(*ParseSize("--size", "10G"), int64_t{10} << 30);
  EXPECT_EQ(*ParseSize("--size", "512M"), int64_t{512} << 20);
  EXPECT_EQ(*ParseSize("--size", "512Mi"), int64_t{512} << 20);
  EXPECT_EQ(*ParseSize("--size", "1TiB"), int64_t{1} << 40);
  EXPECT_EQ(*ParseSize("--size", "2k"), 2048);
  EXPECT_EQ(ParseSize("--size", "1.5G").status().message(),
            "--size: '1.5G' is not a size (bytes, or a whole number with K, M, G, T or P: 10G, 512M)");
  EXPECT_EQ(ParseSize("--size", "G").status().message(),
            "--size: 'G' is not a size (bytes, or a whole number with K, M, G, T or P: 10G, 512M)");
  EXPECT_EQ(ParseSize("--size", "10X").status().message(),
            "--size: '10X' is not a size (bytes, or a whole number with K, M, G, T or P: 10G, 512M)");
  EXPECT_EQ(ParseSize("--size", "0").status().message(), "--size: '0' must be above 0 and at most 4 EiB");
  EXPECT_EQ(ParseSize("--size", "5000P").status().message(), "--size: '5000P' must be above 0 and at most 4 EiB");
  EXPECT_EQ(ParseSize("--size", "99999999999999999999").status().message(),
            "--size: '99999999999999999999' is not a size (bytes, or a whole number with K, M, G, T or P: 10G, 512M)");
}

TEST(CliVolume, FormatsSizesAndTheTable) {
  EXPECT_EQ(FormatSize(100), "100 B");
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatSize(int64_t{10} << 30), "10 GiB");
  rpc::ListVolumesResponse resp;
  rpc::Volume* v = resp.add_volumes();
  v->set_name("data");
  v->set_tenant("a");
  v->set_size_limit_bytes(int64_t{10} << 30);
  v->set_used_bytes(2048);
  v->set_generation(3);
  v->add_used_by("12");
  v->add_snapshots()->set_name("before");
  std::string table = FormatVolumes(resp);
  EXPECT_NE(table.find("NAME"), std::string::npos);
  EXPECT_NE(table.find("data"), std::string::npos);
  EXPECT_NE(table.find("10 GiB"), std::string::npos);
  EXPECT_NE(table.find("2 KiB"), std::string::npos);
  EXPECT_NE(table.find("never"), std::string::npos);
  EXPECT_NE(table.find("before"), std::string::npos);
}

}  // namespace
}  // namespace athanor::cli
