// Fuzzes the S3 response decoders: the XML parser, ListObjectsV2 and
// ListMultipartUploads pages (with and without a store prefix), error codes,
// and pagination: the input split at "\n--\n" is a sequence of pages that a
// listing follows until one is not truncated or a continuation repeats.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "checkpoint/s3/s3_client.h"
#include "checkpoint/s3/s3_listing.h"
#include "checkpoint/s3/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view doc(reinterpret_cast<const char*>(data), size);
  (void)athanor::xml::Parse(doc);
  (void)athanor::xml::FindText(doc, "Code");
  (void)athanor::ParseListUploadsPage(doc, "p");
  (void)athanor::BodyReserveHint(doc.substr(0, 32));
  std::vector<absl::string_view> pages = absl::StrSplit(doc, "\n--\n");
  for (const char* prefix : {"", "p"}) {
    athanor::ListCursor cursor;
    for (absl::string_view body : pages) {
      auto page = athanor::ParseListObjectsPage(body, prefix);
      if (!page.ok() || !page->truncated) break;
      if (page->next_token.empty()) __builtin_trap();
      if (!cursor.Advance(page->next_token).ok()) break;
    }
  }
  return 0;
}
