#include "checkpoint/s3/s3_options.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(S3Options, QueryParametersWinOverTheEnvironment) {
  std::map<std::string, std::string> env = {{"AWS_ENDPOINT_URL", "http://env:1"},
                                            {"AWS_REGION", "eu-west-1"},
                                            {"AWS_ACCESS_KEY_ID", "envkey"},
                                            {"AWS_SECRET_ACCESS_KEY", "envsecret"}};
  auto o = ParseS3Options("s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000/&part_size=5242880"
                          "&conditional_put=true&upload_threads=3",
                          env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bucket, "bkt");
  EXPECT_EQ(o->prefix, "some/prefix");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(o->region, "eu-west-1");
  EXPECT_EQ(o->access_key, "envkey");
  EXPECT_EQ(o->secret_key, "envsecret");
  EXPECT_EQ(o->part_size, 5242880u);
  EXPECT_EQ(o->upload_threads, 3);
  EXPECT_TRUE(o->conditional_put);
}

TEST(S3Options, DefaultsToAwsAndRejectsBadInput) {
  auto o = ParseS3Options("s3://b", {{"AWS_ACCESS_KEY_ID", "k"}, {"AWS_SECRET_ACCESS_KEY", "s"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(o->prefix, "");
  EXPECT_EQ(ParseS3Options("s3://b", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseS3Options("s3://b?access_key=k&secret_key=s&part_size=abc", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseS3Options("s3://b?access_key=k&secret_key=s&conditional_put=maybe", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseS3Options("file:///x", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// The region shapes the default endpoint's host: only a region name passes.
TEST(S3Options, RegionMustBeARegionName) {
  for (const char* bad : {"evil.example.com%23", "x/y", "EU-WEST-1", "a:1", "a@b"}) {
    auto o = ParseS3Options(absl::StrCat("s3://b/p?region=", bad, "&access_key=k&secret_key=s"), {});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find("is not a region name (at most 32 of a-z, 0-9 and '-', e.g. eu-west-1)"),
              absl::string_view::npos)
        << o.status();
  }
  auto o = ParseS3Options("s3://b/p?region=ap-southeast-2&access_key=k&secret_key=s", {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->endpoint, "https://s3.ap-southeast-2.amazonaws.com");
  auto env = ParseS3Options("s3://b/p?access_key=k&secret_key=s", {{"AWS_REGION", "evil.com/"}});
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor
