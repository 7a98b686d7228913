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

TEST(ValidationTest, ElasticSizesAndGlobalBatch) {
  JobSpec s = Spec();
  s.nodes = 3;
  s.gpus_per_node = 2;
  s.min_nodes = 2;
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.min_nodes = 4;
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.min_nodes: must be in 0..3 (the job's most nodes), got 4");
  s.min_nodes = -1;
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.min_nodes: must be in 0..3 (the job's most nodes), got -1");
  s.min_nodes = 2;
  s.global_batch = 12;  // 4 and 6 ranks both divide it
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.global_batch = 8;  // 6 ranks do not
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.global_batch: a global batch of 8 samples cannot be split evenly over 2 rank(s) per node on 3 "
            "node(s); pick a multiple of every world size the job may run at");
  s.min_nodes = 1;
  s.global_batch = 10;  // 2 ranks divide it; 4 and 6 do not
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.global_batch: a global batch of 10 samples cannot be split evenly over 2 rank(s) per node on 2, 3 "
            "node(s); pick a multiple of every world size the job may run at");
  s.min_nodes = 0;  // a fixed gang of 3 nodes checks 6 ranks only
  s.global_batch = 18;
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.global_batch = -1;
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.global_batch: must be >= 0, got -1");
  s.global_batch = 0;
  s.min_nodes = 2;
  s.interactive = true;
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.min_nodes: an interactive instance is not elastic");
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
