// The image commands of the `athanor` CLI against a real coordinator (secure,
// no agents). A user of tenant alpha imports a tiny root filesystem (a .tar),
// lists it (--json, every field), may not publish, and may not run or see
// another tenant's private image; an admin publishes the same content,
// which every tenant then sees; removing the two records deletes the
// content from the data store only with the last one.
//
// A hang fails fast: LocalCluster's watchdog (100 s) and ctest's TIMEOUT.
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "storage/archive.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  char dir[] = "/tmp/cli_image_test.XXXXXX";
  return mkdtemp(dir);
}

class CliImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = TempDir();
    data_ = work_ + "/data";
    cluster_ = std::make_unique<LocalCluster>(std::vector<std::string>{"--data-store", "file://" + data_});
    cluster_->StartCoordinator();
    alpha_ = cluster_->CreateToken("alpha");
    beta_ = cluster_->CreateToken("beta");
    // A root filesystem: a file, a folder, a symlink; packed the canonical way.
    const std::string root = work_ + "/root";
    fs::create_directories(root + "/etc");
    fs::create_directories(root + "/bin");
    std::ofstream(root + "/etc/os-release") << "NAME=tiny\n";
    fs::create_symlink("../etc/os-release", root + "/bin/release");
    absl::StatusOr<storage::PackResult> packed = storage::PackTree(root, work_ + "/rootfs.tar");
    ASSERT_TRUE(packed.ok()) << packed.status();
    packed_ = *packed;
  }
  void TearDown() override {
    cluster_.reset();
    std::error_code ec;
    fs::remove_all(work_, ec);
  }
  std::string BlobPath() const { return data_ + "/images/sha256/" + packed_.digest.substr(7) + ".tar"; }
  std::string Line(const std::string& tenant, const std::string& name, bool is_public = false) const {
    return absl::StrCat(tenant, "/", name, " ", packed_.digest, " ", packed_.bytes, " bytes",
                        is_public ? " (public)" : "", "\n");
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string work_, data_, alpha_, beta_;
  storage::PackResult packed_;
};

TEST_F(CliImageTest, ImportListRemove) {
  const std::string source = work_ + "/rootfs.tar";
  const int64_t before = time(nullptr);
  CliResult r = cluster_->CliAs(alpha_, {"image", "import", "tiny", source});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Unpacked and packed again: the same tree, the same digest.
  EXPECT_EQ(r.out, Line("alpha", "tiny"));
  EXPECT_EQ(r.err, absl::StrCat("athanor image import: sent ", packed_.bytes, " / ", packed_.bytes, " bytes\n"));
  EXPECT_TRUE(fs::exists(BlobPath()));

  r = cluster_->CliAs(alpha_, {"image", "ls", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json images = nlohmann::json::parse(r.out)["images"];
  ASSERT_EQ(images.size(), 1u) << r.out;
  const int64_t created = std::stoll(images[0]["created_unix"].get<std::string>());
  EXPECT_GE(created, before);
  EXPECT_LE(created, time(nullptr));
  nlohmann::json expected = {{"name", "tiny"},
                             {"tenant", "alpha"},
                             {"digest", packed_.digest},
                             {"size_bytes", std::to_string(packed_.bytes)},
                             {"public", false},
                             {"created_unix", images[0]["created_unix"]},
                             {"source", source}};
  EXPECT_EQ(images[0], expected);

  // Again without --replace; publishing as a user; a source of no known kind.
  r = cluster_->CliAs(alpha_, {"image", "import", "tiny", source});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tenant alpha already has an image 'tiny' (replace it with --replace) (ALREADY_EXISTS"),
            std::string::npos)
      << r.err;
  r = cluster_->CliAs(alpha_, {"image", "import", "pub", source, "--public"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("only admins publish images"), std::string::npos) << r.err;
  r = cluster_->CliAs(alpha_, {"image", "import", "x", "docker://busybox"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "athanor image import: source 'docker://busybox': expected oci:DIR[:REF], "
                   "docker-archive:FILE or a root-filesystem .tar/.tar.gz (see --help)\n");

  // beta sees nothing of alpha's, and may not run it.
  r = cluster_->CliAs(beta_, {"image", "ls", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"images\":[]}\n");
  r = cluster_->CliAs(beta_, {"image", "ls", "--tenant", "alpha"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("Images.ListImages: tenant 'alpha' is not the caller's"), std::string::npos) << r.err;
  r = cluster_->CliAs(beta_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--image", "tiny", "--", "true"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("image 'tiny': no such image of tenant beta nor a public one"), std::string::npos) << r.err;

  // The admin (tenant "admin") publishes the same content: one blob.
  r = cluster_->Cli({"image", "import", "base", source, "--public"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, Line("admin", "base", true));
  r = cluster_->CliAs(beta_, {"image", "ls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "NAME  TENANT  DIGEST               SIZE  PUBLIC  CREATED               SOURCE");
  EXPECT_NE(r.out.find("\nbase  admin   " + packed_.digest.substr(0, 19) + "  " + std::to_string(packed_.bytes) +
                       "  yes"),
            std::string::npos)
      << r.out;

  r = cluster_->CliAs(alpha_, {"image", "rm", "tiny"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "removed " + Line("alpha", "tiny"));
  EXPECT_TRUE(fs::exists(BlobPath()));  // "base" holds the same content
  r = cluster_->CliAs(alpha_, {"image", "rm", "tiny"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tenant alpha has no image 'tiny' (NOT_FOUND"), std::string::npos) << r.err;
  r = cluster_->CliAs(beta_, {"image", "rm", "base", "--tenant", "admin"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("PERMISSION_DENIED"), std::string::npos) << r.err;
  r = cluster_->Cli({"image", "rm", "base", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["digest"], packed_.digest);
  EXPECT_FALSE(fs::exists(BlobPath()));
}

}  // namespace
}  // namespace athanor::testing
