#include "common/uri.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(Uri, ParsesS3WithQuery) {
  auto uri = ParseUri("s3://bucket/some/prefix?region=eu-west-1&endpoint=http%3A%2F%2Fh%3A9");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ(uri->scheme, "s3");
  EXPECT_EQ(uri->host, "bucket");
  EXPECT_EQ(uri->path, "/some/prefix");
  EXPECT_EQ(uri->query.at("region"), "eu-west-1");
  EXPECT_EQ(uri->query.at("endpoint"), "http://h:9");
}

TEST(Uri, BarePathIsFile) {
  auto uri = ParseUri("/var/ckpt");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->scheme, "file");
  EXPECT_EQ(uri->path, "/var/ckpt");
  auto f = ParseUri("file:///var/ckpt");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->host, "");
  EXPECT_EQ(f->path, "/var/ckpt");
}

TEST(Uri, RejectsMalformed) {
  EXPECT_EQ(ParseUri("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("bucket/x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("s3://b/x?a=%zz").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseUri("s3://b/x?a=%2").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Uri, SplitHostPort) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:8080", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 8080);
  ASSERT_TRUE(SplitHostPort("[::1]:9", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 9);
  EXPECT_FALSE(SplitHostPort("host", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("host:0", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("host:70000", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("host:12x", &host, &port).ok());
}

// Found by fuzz_uri: ToString printed values and bare paths that parsed
// back as something else.
TEST(Uri, ToStringParsesBackToTheSameUri) {
  for (const char* text : {".[::1]:45:", "/a?b%c", "s3://b/p?a=%26&%3D=x+y&k", "file:///x?region=a%20b",
                           "file://", "s3://u@bucket"}) {
    auto uri = ParseUri(text);
    ASSERT_TRUE(uri.ok()) << text;
    auto again = ParseUri(uri->ToString());
    ASSERT_TRUE(again.ok()) << text << " -> " << uri->ToString();
    EXPECT_EQ(again->scheme, uri->scheme) << text;
    EXPECT_EQ(again->host, uri->host) << text;
    EXPECT_EQ(again->path, uri->path) << text;
    EXPECT_EQ(again->query, uri->query) << text << " -> " << uri->ToString();
  }
  EXPECT_EQ(ParseUri("s3://b/p?a=%26")->ToString(), "s3://b/p?a=%26");
}

}  // namespace
}  // namespace athanor
