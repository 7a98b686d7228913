#include "worker/agent/sandbox_image.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace athanor::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SandboxImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/athanor-sandbox-image-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    rootfs_ = dir_ + "/rootfs";
    fs::create_directories(rootfs_ + "/bin");
    std::ofstream(rootfs_ + "/bin/busybox") << "not really";
    fs::create_symlink("busybox", rootfs_ + "/bin/sh");
    fs::create_symlink("/bin", rootfs_ + "/sbin");  // absolute: resolved inside the image
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, rootfs_;
};

TEST_F(SandboxImageTest, ReadElfFindsTheLoaderAndRefusesWhatIsNotElf) {
  absl::StatusOr<ElfInfo> cat = ReadElf("/usr/bin/cat");
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->interpreter, "/lib64/ld-linux-x86-64.so.2");
  absl::StatusOr<ElfInfo> busybox = ReadElf("/bin/busybox");  // busybox-static
  ASSERT_TRUE(busybox.ok()) << busybox.status();
  EXPECT_EQ(busybox->interpreter, "");
  EXPECT_EQ(ReadElf(rootfs_ + "/bin/busybox").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadElf(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  // A header whose program headers lie past the file's end.
  std::ifstream in("/usr/bin/cat", std::ios::binary);
  std::string head(100, '\0');
  in.read(head.data(), 100);
  std::ofstream(dir_ + "/truncated", std::ios::binary) << head;
  absl::StatusOr<ElfInfo> truncated = ReadElf(dir_ + "/truncated");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(truncated.status().message(), HasSubstr("program headers outside the file"));
}

TEST_F(SandboxImageTest, InImageFollowsTheImagesLinksInsideItOnly) {
  EXPECT_TRUE(InImage(rootfs_, "/bin/sh"));
  EXPECT_TRUE(InImage(rootfs_, "/sbin/busybox"));  // "/bin" resolved in the image
  EXPECT_FALSE(InImage(rootfs_, "/usr/bin/cat"));
  EXPECT_FALSE(InImage(rootfs_, "/../../usr/bin/cat"));  // ".." stays inside
}

TEST_F(SandboxImageTest, DriverLibrariesAreBoundIntoTheImage) {
  std::string libs = dir_ + "/libs";
  fs::create_directories(libs);
  for (const char* f : {"libcuda.so.550.54", "libnvidia-ml.so.550.54", "libcudart.so.12", "libfoo.so"}) {
    std::ofstream(libs + "/" + f) << "lib";
  }
  fs::create_symlink("libcuda.so.550.54", libs + "/libcuda.so.1");
  EXPECT_THAT(HostDriverLibraries({libs, dir_ + "/none"}),
              ElementsAre(libs + "/libcuda.so.1", libs + "/libcuda.so.550.54", libs + "/libnvidia-ml.so.550.54"));
  absl::StatusOr<ImageRun> run = PlanImageRun(rootfs_, {}, {"/bin/sh", "-c", "true"}, 1000, {}, {libs});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->argv, ElementsAre("/bin/sh", "-c", "true"));  // the image's own: natively
  EXPECT_THAT(run->mounts, ElementsAre(absl::StrCat("rofile:", libs, "/libcuda.so.550.54:/usr/local/nvidia/lib64/libcuda.so.1"),
                                       absl::StrCat("rofile:", libs, "/libcuda.so.550.54:/usr/local/nvidia/lib64/libcuda.so.550.54"),
                                       absl::StrCat("rofile:", libs, "/libnvidia-ml.so.550.54:/usr/local/nvidia/lib64/libnvidia-ml.so.550.54")));
  EXPECT_EQ(run->library_path_append, "/usr/local/nvidia/lib64");
  // None on the host: nothing added.
  absl::StatusOr<ImageRun> bare = PlanImageRun(rootfs_, {}, {"sh"}, 1000, {}, {dir_ + "/none"});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->mounts.empty());
  EXPECT_EQ(bare->library_path_append, "");
  EXPECT_THAT(bare->argv, ElementsAre("sh"));
}

TEST_F(SandboxImageTest, AHostProgramInAMountedFolderRunsThroughTheHostLoader) {
  absl::StatusOr<ImageRun> run =
      PlanImageRun(rootfs_, {"bind:/usr/bin:/usr/bin"}, {"/usr/bin/cat", "/etc/os-release"}, 1000, {}, {});
  ASSERT_TRUE(run.ok()) << run.status();
  std::string loader = fs::canonical("/lib64/ld-linux-x86-64.so.2").string();
  ASSERT_EQ(run->argv.size(), 7u);
  EXPECT_EQ(run->argv[0], absl::StrCat(kHostPrefix, loader));
  EXPECT_EQ(run->argv[1], "--argv0");
  EXPECT_EQ(run->argv[2], "/usr/bin/cat");
  EXPECT_EQ(run->argv[3], "--library-path");
  EXPECT_TRUE(absl::StartsWith(run->argv[4], std::string(kHostPrefix) + "/")) << run->argv[4];
  EXPECT_EQ(run->argv[5], "/usr/bin/cat");  // shown by the bind at its own path
  EXPECT_EQ(run->argv[6], "/etc/os-release");
  // Each library folder bound read-only under /.athanor/host, the loader's among them.
  bool loader_bound = false;
  for (const std::string& m : run->mounts) {
    ASSERT_TRUE(absl::StartsWith(m, "robind:")) << m;  // nothing hidden under them here
    std::string src = m.substr(7, m.rfind(':') - 7);
    EXPECT_EQ(m.substr(m.rfind(':') + 1), absl::StrCat(kHostPrefix, src));
    loader_bound = loader_bound || absl::StartsWith(loader, src + "/");
  }
  EXPECT_TRUE(loader_bound);
}

TEST_F(SandboxImageTest, HiddenPathsInsideTheHostLibraryFoldersStayHidden) {
  std::string loader_dir = fs::canonical("/lib64/ld-linux-x86-64.so.2").parent_path().string();
  absl::StatusOr<ImageRun> run = PlanImageRun(rootfs_, {"bind:/usr/bin:/usr/bin"}, {"/usr/bin/cat"}, 1000,
                                              {loader_dir + "/secret", "/var/lib/athanor"}, {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(run->mounts, ::testing::Contains(absl::StrCat("ro::", kHostPrefix, loader_dir, "/secret")));
  EXPECT_THAT(run->mounts, ::testing::Not(::testing::Contains(absl::StrCat("ro::", kHostPrefix, "/var/lib/athanor"))));
}

TEST_F(SandboxImageTest, AHostProgramOutsideTheMountsIsShownOnlyUnderTheRules) {
  absl::StatusOr<ImageRun> hidden =
      PlanImageRun(rootfs_, {}, {"/usr/bin/cat"}, 1000, {"/usr/bin"}, {});
  EXPECT_EQ(hidden.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hidden.status().message(),
            "the command /usr/bin/cat is not in the job's image and lies under /usr/bin, which never shows to "
            "ranks; install it where ranks see it");
  if (geteuid() != 0) GTEST_SKIP() << "checking a tenant uid's access needs root";
  absl::StatusOr<ImageRun> run = PlanImageRun(rootfs_, {}, {"/usr/bin/cat"}, 65534, {}, {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->argv.back(), absl::StrCat(kHostPrefix, "/usr/bin/cat"));
  EXPECT_THAT(run->mounts, ::testing::Contains(absl::StrCat("rofile:", fs::canonical("/usr/bin/cat").string(), ":",
                                                            kHostPrefix, "/usr/bin/cat")));
}

}  // namespace
}  // namespace athanor::agent
