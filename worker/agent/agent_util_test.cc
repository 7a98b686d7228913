// proc_stats (CPU time from /proc) and workdir_archive (ustar packing).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "worker/agent/gpu_util.h"
#include "worker/agent/proc_stats.h"
#include "worker/agent/workdir_archive.h"

namespace athanor::agent {
namespace {

TEST(ProcStatsTest, ParsesStatLineWithSpacesInCommand) {
  std::string line =
      "4242 (my (odd) cmd) S 1 4200 4200 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 1 0 100 0 0";
  pid_t pgid = 0;
  double cpu = 0;
  ASSERT_TRUE(ParseProcStat(line, 100, &pgid, &cpu));
  EXPECT_EQ(pgid, 4200);
  EXPECT_DOUBLE_EQ(cpu, 3.5);  // (250 + 50 + 30 + 20) / 100
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1", 100, &pgid, &cpu));
  EXPECT_FALSE(ParseProcStat("garbage", 100, &pgid, &cpu));
}

TEST(ProcStatsTest, MeasuresOwnProcessGroup) {
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + i;  // burn a little CPU
  double cpu = ProcessGroupCpuSeconds(getpgrp());
  EXPECT_GT(cpu, 0.0);
  EXPECT_EQ(ProcessGroupCpuSeconds(999999999), -1);
}

TEST(GpuUtilTest, ParsesNvidiaSmiCsv) {
  std::map<int, double> util = ParseIndexedCsv("0, 37\n1, 0\nbad line\n2, [N/A]\n\n3,100\n");
  EXPECT_EQ(util, (std::map<int, double>{{0, 37}, {1, 0}, {3, 100}}));
  EXPECT_TRUE(ParseIndexedCsv("").empty());
}

TEST(WorkdirArchiveTest, PacksFilesAndDirsAsUstar) {
  char tmpl[] = "/tmp/agent_util_test.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/a.txt") << "hello";
  std::ofstream(dir + "/sub/b.txt") << std::string(600, 'b');
  absl::StatusOr<std::string> tar = TarDirectory(dir);
  ASSERT_TRUE(tar.ok()) << tar.status();
  // a.txt: header + 1 block; sub/: header; sub/b.txt: header + 2 blocks; 2 end blocks.
  ASSERT_EQ(tar->size(), 512u * 8);
  EXPECT_EQ(tar->substr(0, 6), std::string("a.txt\0", 6));
  EXPECT_EQ(tar->substr(124, 11), "00000000005");
  EXPECT_EQ(tar->substr(156, 1), "0");
  EXPECT_EQ(tar->substr(257, 6), std::string("ustar\0", 6));
  EXPECT_EQ(tar->substr(512, 5), "hello");
  EXPECT_EQ(tar->substr(1024, 5), std::string("sub/\0", 5));
  EXPECT_EQ(tar->substr(1024 + 156, 1), "5");
  EXPECT_EQ(tar->substr(1536, 9), "sub/b.txt");
  EXPECT_EQ(tar->substr(2048, 600), std::string(600, 'b'));
  EXPECT_EQ(tar->substr(512 * 6), std::string(1024, '\0'));
  // The checksum field holds the unsigned byte sum with the field as spaces.
  std::string h = tar->substr(0, 512);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  EXPECT_EQ(std::stoul(h.substr(148, 7), nullptr, 8), sum);
  std::filesystem::remove_all(dir);
}

// A rank's links in its work dir (to a root-only file, to a folder of
// another tenant's) are not followed: the archive holds neither's bytes.
TEST(WorkdirArchiveTest, LinksAreNeverFollowed) {
  char tmpl[] = "/tmp/agent_util_test.XXXXXX";
  std::string top = mkdtemp(tmpl);
  std::filesystem::create_directories(top + "/work/sub");
  std::filesystem::create_directories(top + "/other");
  std::ofstream(top + "/secret") << "root-only secret";
  std::ofstream(top + "/other/log") << "another tenant's log";
  std::ofstream(top + "/work/sub/mine.txt") << "mine";
  std::filesystem::create_symlink(top + "/secret", top + "/work/key");
  std::filesystem::create_symlink("../../other", top + "/work/sub/other");
  absl::StatusOr<std::string> tar = TarDirectory(top + "/work");
  ASSERT_TRUE(tar.ok()) << tar.status();
  // sub/: header; sub/mine.txt: header + 1 block; 2 end blocks.
  EXPECT_EQ(tar->size(), 512u * 5);
  EXPECT_EQ(tar->substr(0, 5), std::string("sub/\0", 5));
  EXPECT_EQ(tar->substr(512, 12), "sub/mine.txt");
  EXPECT_EQ(tar->find("secret"), std::string::npos);
  EXPECT_EQ(tar->find("another tenant"), std::string::npos);
  std::filesystem::remove_all(top);
}

}  // namespace
}  // namespace athanor::agent
