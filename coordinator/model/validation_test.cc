#include "coordinator/model/validation.h"

#include <gtest/gtest.h>

#include <string>

namespace athanor::coord {
namespace {

JobSpec Spec() {
  JobSpec s;
  s.command = {"true"};
  return s;
}

TEST(ValidationTest, ResourceNames) {
  for (const char* good : {"a", "torch-2.4_cuda12.4", "A.b-C_d", "x1"}) {
    EXPECT_TRUE(ValidateResourceName("spec.image", good).ok()) << good;
  }
  EXPECT_EQ(ValidateResourceName("spec.image", "").message(), "spec.image: must not be empty");
  EXPECT_EQ(ValidateResourceName("spec.image", "..").message(), "spec.image: '..' is not a name");
  EXPECT_EQ(ValidateResourceName("spec.image", "a/b").message(),
            "spec.image: may hold only letters, digits, '.', '_' and '-'");
  EXPECT_EQ(ValidateResourceName("spec.image", "a b").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateResourceName("v", std::string(129, 'a')).message(), "v: is 129 bytes; at most 128");
  EXPECT_TRUE(ValidateResourceName("v", std::string(128, 'a')).ok());
}

TEST(ValidationTest, MountPaths) {
  EXPECT_TRUE(ValidateMountPath("p", "/data").ok());
  EXPECT_TRUE(ValidateMountPath("p", "/home/me/weights").ok());
  EXPECT_TRUE(ValidateMountPath("p", "/tmpdata").ok());
  EXPECT_EQ(ValidateMountPath("p", "data").message(), "p: must be an absolute path");
  EXPECT_EQ(ValidateMountPath("p", "/").message(), "p: cannot be '/'");
  EXPECT_EQ(ValidateMountPath("p", "/a/../etc").message(),
            "p: '/a/../etc' is not normalised (an empty, '.' or '..' part)");
  EXPECT_EQ(ValidateMountPath("p", "/a//b").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateMountPath("p", "/a/").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateMountPath("p", "/a:b").message(), "p: holds a control character or ':'");
  EXPECT_EQ(ValidateMountPath("p", "/proc/x").message(),
            "p: '/proc/x' is inside /proc, which the sandbox makes itself");
  EXPECT_EQ(ValidateMountPath("p", "/dev").message(), "p: '/dev' is inside /dev, which the sandbox makes itself");
}

// A notebook job's command is the coordinator's (core/notebook_command.h).
TEST(ValidationTest, NotebookNeedsNoCommandButAnInstance) {
  JobSpec s = Spec();
  s.notebook = true;
  s.command.clear();
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.notebook: a notebook is an interactive instance (athanor alloc --notebook)");
  s.interactive = true;
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.notebook = false;
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.command: must not be empty");
}

TEST(ValidationTest, JobImageAndVolumes) {
  JobSpec s = Spec();
  s.image = "busybox";
  s.volumes = {{"data", "/data", false}, {"weights", "/weights", true}};
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.image = "bad/name";
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.image: may hold only letters, digits, '.', '_' and '-'");
  s.image = "";
  s.volumes.push_back({"data", "/other", true});
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.volumes: volume 'data' is mounted twice");
  s.volumes.back() = {"more", "/data/sub", true};
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.volumes: mount paths '/data' and '/data/sub' overlap");
  s.volumes.back() = {"more", "relative", true};
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.volumes.path: must be an absolute path");
  s.volumes.assign(kMaxVolumesPerJob + 1, VolumeMount{"v", "/v", true});
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.volumes: 33 mounts; at most 32");
}

}  // namespace
}  // namespace athanor::coord
