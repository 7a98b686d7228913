#include "worker/agent/tenant_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;

class TenantDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-tenant-dir.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/agent/jobs");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TenantDirTest, MakesTheFoldersAndOwnsTheLast) {
  const uid_t uid = geteuid() == 0 ? 200123 : geteuid();
  ASSERT_TRUE(MakeTenantDir(dir_ + "/store/a/7", uid, 0750, {dir_ + "/agent"}).ok());
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/store/a/7").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(stat((dir_ + "/store/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid()) << "the folders above stay the agent's";
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // Again: the same folder is reused.
  EXPECT_TRUE(MakeTenantDir(dir_ + "/store/a/7", uid, 0750, {}).ok());
}

TEST_F(TenantDirTest, NeverFollowsALink) {
  // A relative link planted in a tenant's folder that leads to the agent's work dir.
  fs::create_directories(dir_ + "/store/1");
  fs::create_directory_symlink("../../agent", dir_ + "/store/1/escape");
  absl::Status s = MakeTenantDir(dir_ + "/store/1/escape/2", 200123, 0750, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), dir_ + "/store/1/escape is a link; a checkpoint folder is made only along real folders");
  EXPECT_FALSE(fs::exists(dir_ + "/agent/2"));
  // The last part a link, too.
  fs::create_directory_symlink(dir_ + "/agent", dir_ + "/store/3");
  s = MakeTenantDir(dir_ + "/store/3", 200123, 0750, {});
  EXPECT_EQ(s.message(), dir_ + "/store/3 is a link; a checkpoint folder is made only along real folders");
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/agent").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid()) << "nothing was owned through the link";
}

TEST_F(TenantDirTest, RefusesTheAgentsFoldersAndDotParts) {
  absl::Status s = MakeTenantDir(dir_ + "/agent/jobs/1", 200123, 0750, {dir_ + "/agent"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "'" + dir_ + "/agent/jobs/1' lies in or above " + dir_ + "/agent, which ranks never see");
  s = MakeTenantDir(dir_, 200123, 0750, {dir_ + "/agent"});
  EXPECT_EQ(s.message(), "'" + dir_ + "' lies in or above " + dir_ + "/agent, which ranks never see");
  s = MakeTenantDir(dir_ + "/store/../agent/x", 200123, 0750, {});
  EXPECT_EQ(s.message(), "'" + dir_ + "/store/../agent/x' holds a '..' part");
}

}  // namespace
}  // namespace athanor::agent
