#include "checkpoint/s3/sigv4.h"

#include <gtest/gtest.h>

namespace athanor::sigv4 {
namespace {

// The GET-object example of the AWS S3 SigV4 documentation.
TEST(SigV4, MatchesTheAwsGetObjectExample) {
  Credentials creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3"};
  std::map<std::string, std::string> headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                                                {"Range", "bytes=0-9"},
                                                {"x-amz-content-sha256", kEmptySha256},
                                                {"x-amz-date", "20130524T000000Z"}};
  EXPECT_EQ(Authorization(creds, "GET", "/test.txt", {}, headers, kEmptySha256, "20130524T000000Z"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, HashesAndEncodes) {
  EXPECT_EQ(HexSha256(""), kEmptySha256);
  EXPECT_EQ(HexSha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(UriEncode("a b/c~d+e=f", true), "a%20b/c~d%2Be%3Df");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z");
}

}  // namespace
}  // namespace athanor::sigv4
