#include "worker/agent/command_access.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uid_t kTenant = 200123;

// A folder under /tmp (which sandboxes hide) holding `name` with `mode`.
class CommandAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-command-access.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    return path;
  }
  std::vector<std::string> Mounts() const {
    return {"ro::/var/agent", "tmpfs::/tmp", "ro::/root", "ro::/home", "bind:/tmp/shared:/tmp/shared"};
  }
  std::string dir_;
};

TEST(ScriptInterpreter, ReadsTheShebangLine) {
  char tmpl[] = "/tmp/athanor-shebang.XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  std::string text = "#!  /usr/bin/env python3 -u\nprint(1)\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  EXPECT_EQ(ScriptInterpreter(tmpl), "/usr/bin/env");
  std::ofstream(tmpl, std::ios::trunc) << "\x7f" "ELF....";
  EXPECT_EQ(ScriptInterpreter(tmpl), "");
  unlink(tmpl);
  EXPECT_EQ(ScriptInterpreter("/nonexistent/x"), "");
}

TEST_F(CommandAccessTest, VisibleCommandsNeedNothing) {
  auto m = MountsToRun(Mounts(), "/usr/bin/true", kTenant, {"/var/agent"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->empty());
  m = MountsToRun(Mounts(), "train.sh", kTenant, {"/var/agent"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->empty());
}

TEST_F(CommandAccessTest, ShowsAHiddenFileTheTenantMayRun) {
  if (geteuid() != 0) GTEST_SKIP() << "checking access as another uid needs root";
  std::string tool = Write("tool", "\x7f" "ELF", 0755);
  auto m = MountsToRun(Mounts(), tool, kTenant, {"/var/agent"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(*m, ElementsAre("rofile:" + tool + ":" + tool));
  // A script brings its interpreter when that is hidden too.
  Write("interp", "\x7f" "ELF", 0755);
  std::string script = Write("run.sh", "#!" + dir_ + "/interp -e\necho hi\n", 0755);
  m = MountsToRun(Mounts(), script, kTenant, {"/var/agent"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(*m, ElementsAre("rofile:" + script + ":" + script, "rofile:" + dir_ + "/interp:" + dir_ + "/interp"));
}

TEST_F(CommandAccessTest, RefusesWhatTheTenantCannotReadAndNamesTheWayOut) {
  if (geteuid() != 0) GTEST_SKIP() << "checking access as another uid needs root";
  std::string tool = Write("tool", "\x7f" "ELF", 0700);  // root's only
  auto m = MountsToRun(Mounts(), tool, kTenant, {"/var/agent"});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.status().message(),
            "the command " + tool + " lies under /tmp, which the rank's sandbox hides, and the tenant's uid 200123 "
            "cannot read and execute it there; make it readable and executable by uid 200123 (the tenant's) "
            "through every parent folder (for example chmod o+rx " + tool + " and o+x on each folder above it), "
            "or install it where ranks see it (for example /usr/local/bin or /opt)");
  // Readable file, but a parent folder the tenant cannot search.
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  m = MountsToRun(Mounts(), tool, kTenant, {"/var/agent"});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("cannot read and execute it there"));
  // A script whose hidden interpreter the tenant cannot run.
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  Write("interp", "\x7f" "ELF", 0700);
  std::string script = Write("run.sh", "#!" + dir_ + "/interp\n", 0755);
  m = MountsToRun(Mounts(), script, kTenant, {"/var/agent"});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("the script " + script + " runs " + dir_ + "/interp: the command"));
}

TEST_F(CommandAccessTest, NeverShowsTheAgentsWorkDirOrHiddenPaths) {
  if (geteuid() != 0) GTEST_SKIP() << "checking access as another uid needs root";
  std::string tool = Write("tool", "\x7f" "ELF", 0755);
  std::vector<std::string> mounts = Mounts();
  mounts.push_back("ro::" + dir_);  // the agent's work dir lies here
  auto m = MountsToRun(mounts, tool, kTenant, {dir_});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("never shows to ranks"));
  // A link in a showable folder that leads into the work dir.
  std::string link = "/tmp/athanor-command-access-link-" + std::to_string(getpid());
  fs::create_symlink(tool, link);
  m = MountsToRun(mounts, link, kTenant, {dir_});
  fs::remove(link);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("never shows to ranks"));
}

TEST(CanExecuteAs, ChecksAsThatUid) {
  if (geteuid() != 0) GTEST_SKIP() << "checking access as another uid needs root";
  auto yes = CanExecuteAs(kTenant, kTenant, "/bin/sh");
  ASSERT_TRUE(yes.ok()) << yes.status();
  EXPECT_TRUE(*yes);
  auto no = CanExecuteAs(kTenant, kTenant, "/root/.nonexistent-athanor");
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_FALSE(*no);
}

}  // namespace
}  // namespace athanor::agent
