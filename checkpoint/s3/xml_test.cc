#include "checkpoint/s3/xml.h"

#include <gtest/gtest.h>

namespace athanor::xml {
namespace {

TEST(Xml, ReadsListObjectsV2) {
  std::string doc = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>
<IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;en</NextContinuationToken>
<Contents><Key>j/a&lt;1&gt;</Key><Size>10</Size></Contents>
<Contents><Key>j/b</Key><Size>0</Size><Owner><ID>x</ID></Owner></Contents>
<Contents/>
</ListBucketResult>)";
  std::vector<std::string> contents = Elements(doc, "Contents");
  ASSERT_EQ(contents.size(), 3u);
  EXPECT_EQ(Text(contents[0], "Key"), "j/a<1>");
  EXPECT_EQ(Text(contents[0], "Size"), "10");
  EXPECT_EQ(Text(contents[1], "Key"), "j/b");
  EXPECT_EQ(contents[2], "");
  EXPECT_EQ(Text(doc, "IsTruncated"), "true");
  EXPECT_EQ(Text(doc, "NextContinuationToken"), "tok&en");
  EXPECT_EQ(Text(doc, "Missing"), "");
}

TEST(Xml, HandlesNestingAndEntities) {
  EXPECT_EQ(Elements("<a><a>x</a></a><a>y</a>", "a"), (std::vector<std::string>{"<a>x</a>", "y"}));
  EXPECT_EQ(Unescape("&#65;&#x42;&quot;&apos;&unknown;"), "AB\"'&unknown;");
  EXPECT_EQ(Unescape("&#xe9;"), "\xc3\xa9");
  EXPECT_EQ(Escape("<\"&'>"), "&lt;&quot;&amp;&apos;&gt;");
  EXPECT_EQ(Text("<Error><Code>SlowDown</Code></Error>", "Code"), "SlowDown");
  EXPECT_EQ(Elements("<a>unterminated", "a").size(), 0u);
}

}  // namespace
}  // namespace athanor::xml
