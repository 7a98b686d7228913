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
  auto root = Parse(doc);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "ListBucketResult");
  std::vector<const Element*> contents = root->Children("Contents");
  ASSERT_EQ(contents.size(), 3u);
  EXPECT_EQ(contents[0]->ChildText("Key"), "j/a<1>");
  EXPECT_EQ(contents[0]->ChildText("Size"), "10");
  EXPECT_EQ(contents[1]->ChildText("Key"), "j/b");
  EXPECT_EQ(contents[1]->Child("Owner")->ChildText("ID"), "x");
  EXPECT_TRUE(contents[2]->children.empty());
  EXPECT_EQ(root->ChildText("IsTruncated"), "true");
  EXPECT_EQ(root->ChildText("NextContinuationToken"), "tok&en");
  EXPECT_EQ(root->ChildText("Missing"), "");
  EXPECT_EQ(FindText(doc, "ID"), "x");
}

TEST(Xml, DecodesEntitiesAndNamespacePrefixes) {
  auto root = Parse("<s3:a xmlns:s3='u'><s3:b>&#65;&#x42;&quot;&apos;&#xe9;</s3:b></s3:a>");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "a");
  EXPECT_EQ(root->ChildText("b"), "AB\"'\xc3\xa9");
  EXPECT_EQ(Escape("<\"&'>"), "&lt;&quot;&amp;&apos;&gt;");
  EXPECT_EQ(FindText("<Error><Code>SlowDown</Code></Error>", "Code"), "SlowDown");
}

// The hand-written reader these replace read comments as markup, missed CDATA
// and decoded &#0; into a NUL.
TEST(Xml, CommentsAreSkippedAndCdataIsText) {
  auto root = Parse("<r><Key>a<!-- <Key>evil</Key> -->b</Key><Key><![CDATA[x<y>&amp;]]></Key></r>");
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<const Element*> keys = root->Children("Key");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0]->text, "ab");
  EXPECT_EQ(keys[1]->text, "x<y>&amp;");
}

TEST(Xml, ANulCharacterReferenceIsAnError) {
  auto root = Parse("<r><Key>a&#0;b</Key></r>");
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindText("<r><Key>a&#0;b</Key></r>", "Key"), "");
}

TEST(Xml, MalformedDocumentsDtdsAndDeepNestingAreErrors) {
  EXPECT_FALSE(Parse("<a>unterminated").ok());
  EXPECT_FALSE(Parse("").ok());
  EXPECT_FALSE(Parse("<a></b>").ok());
  EXPECT_FALSE(Parse("<html>proxy error").ok());
  auto dtd = Parse("<!DOCTYPE r [<!ENTITY e 'x'>]><r>&e;</r>");
  EXPECT_EQ(dtd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dtd.status().message().find("document type"), absl::string_view::npos) << dtd.status();
  std::string deep;
  for (int i = 0; i < kMaxDepth + 1; ++i) deep += "<a>";
  for (int i = 0; i < kMaxDepth + 1; ++i) deep += "</a>";
  auto too_deep = Parse(deep);
  EXPECT_NE(too_deep.status().message().find("deeper"), absl::string_view::npos) << too_deep.status();
  EXPECT_EQ(FindText("not xml at all", "Code"), "");
}

}  // namespace
}  // namespace athanor::xml
