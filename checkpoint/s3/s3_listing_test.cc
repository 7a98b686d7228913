#include "checkpoint/s3/s3_listing.h"

#include <gtest/gtest.h>

#include "checkpoint/s3/s3_client.h"

namespace athanor {
namespace {

std::string Page(const std::string& contents, const std::string& tail) {
  return "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + contents + tail +
         "</ListBucketResult>";
}

TEST(S3Listing, ParsesAPageAndStripsThePrefix) {
  auto page = ParseListObjectsPage(
      Page("<Contents><Key>p/j/a</Key><Size>10</Size><LastModified>2026-01-02T03:04:05.000Z</LastModified>"
           "</Contents><Contents><Key>p/</Key><Size>0</Size></Contents>",
           "<IsTruncated>true</IsTruncated><NextContinuationToken>t1</NextContinuationToken>"),
      "p");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 1u);  // the "p/" folder marker is skipped
  EXPECT_EQ(page->objects[0].key, "j/a");
  EXPECT_EQ(page->objects[0].size, 10u);
  EXPECT_EQ(page->objects[0].mtime_unix, 1767323045);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "t1");
}

// A key shorter than the prefix made substr() throw std::out_of_range.
TEST(S3Listing, AKeyOutsideThePrefixIsDataLoss) {
  for (const char* key : {"p", "", "q/j/a", "pp/j/a"}) {
    auto page = ParseListObjectsPage(Page(std::string("<Contents><Key>") + key + "</Key><Size>1</Size></Contents>",
                                          "<IsTruncated>false</IsTruncated>"),
                                     "p");
    EXPECT_EQ(page.status().code(), absl::StatusCode::kDataLoss) << key;
  }
  EXPECT_EQ(StripStorePrefix("p", "p").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(*StripStorePrefix("", "k"), "k");
}

TEST(S3Listing, BadSizesTruncationWithoutATokenAndNonXmlAreDataLoss) {
  EXPECT_EQ(ParseListObjectsPage(Page("<Contents><Key>k</Key><Size>-1</Size></Contents>", ""), "")
                .status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseListObjectsPage(Page("", "<IsTruncated>true</IsTruncated>"), "").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseListObjectsPage("<html>gateway</html>", "").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseListObjectsPage("<Error><Code>x</Code></Error>", "").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(S3Listing, ParsesMultipartUploads) {
  auto page = ParseListUploadsPage(
      "<ListMultipartUploadsResult><Upload><Key>p/k</Key><UploadId>u1</UploadId></Upload>"
      "<IsTruncated>true</IsTruncated><NextKeyMarker>p/k</NextKeyMarker>"
      "<NextUploadIdMarker>u1</NextUploadIdMarker></ListMultipartUploadsResult>",
      "p");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->uploads.size(), 1u);
  EXPECT_EQ(page->uploads[0].key, "k");
  EXPECT_EQ(page->uploads[0].upload_id, "u1");
  EXPECT_EQ(page->next_key_marker, "p/k");
  EXPECT_EQ(page->next_upload_id_marker, "u1");
}

// A server that repeats a continuation token would be paged forever.
TEST(S3Listing, ARepeatedContinuationStopsTheListing) {
  ListCursor cursor;
  EXPECT_TRUE(cursor.Advance("t1").ok());
  EXPECT_TRUE(cursor.Advance("t2").ok());
  absl::Status again = cursor.Advance("t1");
  EXPECT_EQ(again.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(again.message().find("'t1'"), absl::string_view::npos) << again;
}

// The server's Content-Length decided how much memory was reserved (up to
// 4 GiB); now it is a capped hint.
TEST(S3Listing, ContentLengthIsACappedHint) {
  EXPECT_EQ(BodyReserveHint("1024"), 1024u);
  EXPECT_EQ(BodyReserveHint("3000000000"), kMaxBodyReserve);
  EXPECT_EQ(BodyReserveHint("99999999999999999999999"), 0u);
  EXPECT_EQ(BodyReserveHint("-5"), 0u);
  EXPECT_EQ(BodyReserveHint("abc"), 0u);
}

}  // namespace
}  // namespace athanor
