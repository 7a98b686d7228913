#include "coordinator/images/image_registry.h"

#include <gtest/gtest.h>

#include <string>

namespace athanor::coord {
namespace {

std::string Digest(char c) { return "sha256:" + std::string(64, c); }

rpc::Image MakeImage(const std::string& tenant, const std::string& name, char digest,
                     bool is_public = false) {
  rpc::Image image;
  image.set_tenant(tenant);
  image.set_name(name);
  image.set_digest(Digest(digest));
  image.set_size_bytes(10240);
  image.set_public_(is_public);
  return image;
}

TEST(ImageDigest, AcceptsOnlyLowercaseSha256) {
  EXPECT_TRUE(ValidateImageDigest("digest", Digest('a')).ok());
  EXPECT_EQ(ValidateImageDigest("digest", Digest('A')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateImageDigest("digest", "sha256:abc").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateImageDigest("digest", "md5:" + std::string(64, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ImageBlobKey(Digest('b')), "images/sha256/" + std::string(64, 'b') + ".tar");
}

TEST(ImageRegistry, PutValidatesAndRefusesAnExistingNameUnlessReplaced) {
  ImageRegistry reg;
  ASSERT_TRUE(reg.Put(MakeImage("alice", "torch-2.3", 'a'), false).ok());
  absl::Status again = reg.Put(MakeImage("alice", "torch-2.3", 'b'), false);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("torch-2.3"), std::string::npos) << again;
  ASSERT_TRUE(reg.Put(MakeImage("alice", "torch-2.3", 'b'), true).ok());
  EXPECT_EQ(reg.Find("alice", "torch-2.3")->digest(), Digest('b'));
  EXPECT_EQ(reg.Put(MakeImage("alice", "a/b", 'a'), false).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Put(MakeImage("alice", std::string(129, 'x'), 'a'), false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.Put(MakeImage("alice", "..", 'a'), false).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reg.Put(MakeImage("alice", std::string(128, 'x'), 'a'), false).ok());
  EXPECT_EQ(reg.size(), 2u);
}

TEST(ImageRegistry, ResolvesTheTenantsOwnImageBeforeAPublicOne) {
  ImageRegistry reg;
  ASSERT_TRUE(reg.Put(MakeImage("admin", "base", 'e', /*is_public=*/true), false).ok());
  ASSERT_TRUE(reg.Put(MakeImage("alice", "base", 'a'), false).ok());
  ASSERT_TRUE(reg.Put(MakeImage("carol", "private", 'c'), false).ok());
  EXPECT_EQ(reg.Resolve("alice", "base")->digest(), Digest('a'));
  EXPECT_EQ(reg.Resolve("bob", "base")->digest(), Digest('e'));
  absl::StatusOr<rpc::Image> hidden = reg.Resolve("bob", "private");
  EXPECT_EQ(hidden.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(hidden.status().message().find("image 'private'"), std::string::npos) << hidden.status();
}

TEST(ImageRegistry, ShowsOwnAndPublicImagesAndAdminsEverything) {
  ImageRegistry reg;
  ASSERT_TRUE(reg.Put(MakeImage("admin", "base", 'e', true), false).ok());
  ASSERT_TRUE(reg.Put(MakeImage("alice", "mine", 'a'), false).ok());
  ASSERT_TRUE(reg.Put(MakeImage("carol", "hers", 'c'), false).ok());
  auto names = [](const std::vector<rpc::Image>& images) {
    std::string out;
    for (const rpc::Image& i : images) out += i.tenant() + "/" + i.name() + " ";
    return out;
  };
  EXPECT_EQ(names(reg.Visible("alice", false)), "admin/base alice/mine ");
  EXPECT_EQ(names(reg.Visible("alice", true)), "admin/base alice/mine carol/hers ");
  EXPECT_EQ(names(reg.OfTenant("carol")), "carol/hers ");
}

TEST(ImageRegistry, RemoveKeepsTheDigestWhileAnotherRecordHoldsIt) {
  ImageRegistry reg;
  ASSERT_TRUE(reg.Put(MakeImage("alice", "one", 'a'), false).ok());
  ASSERT_TRUE(reg.Put(MakeImage("bob", "two", 'a'), false).ok());
  ASSERT_EQ(reg.Remove("alice", "one")->name(), "one");
  EXPECT_TRUE(reg.HasDigest(Digest('a')));
  EXPECT_EQ(reg.Remove("alice", "one").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(reg.Remove("bob", "two").ok());
  EXPECT_FALSE(reg.HasDigest(Digest('a')));
}

TEST(ImageRegistry, RestoreKeepsTheLaterRecordOfAKey) {
  ImageRegistry reg;
  reg.Restore({MakeImage("alice", "x", 'a'), MakeImage("alice", "x", 'b')});
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.Find("alice", "x")->digest(), Digest('b'));
}

}  // namespace
}  // namespace athanor::coord
