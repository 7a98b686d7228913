#include "common/truncate.h"

#include <gtest/gtest.h>

#include <string>

namespace athanor {
namespace {

TEST(TruncateAtWordTest, TextThatFitsIsUnchanged) {
  EXPECT_EQ(TruncateAtWord("", 0), "");
  EXPECT_EQ(TruncateAtWord("out of memory", 13), "out of memory");
  EXPECT_EQ(TruncateAtWord("out of memory", 256), "out of memory");
}

TEST(TruncateAtWordTest, CutsBeforeTheLastWholeWordThatFitsAndMarksTheCut) {
  // Budget 20 - 3 = 17: "ship it in the jo" would split "job's".
  EXPECT_EQ(TruncateAtWord("ship it in the job's workdir, or start", 20), "ship it in the\xE2\x80\xA6");
  // A cut that falls exactly on a space keeps the word before it.
  EXPECT_EQ(TruncateAtWord("abc def ghi", 10), "abc def\xE2\x80\xA6");
  EXPECT_EQ(TruncateAtWord("abc def ghi", 9), "abc\xE2\x80\xA6");
}

TEST(TruncateAtWordTest, DropsWhitespaceBeforeTheCut) {
  EXPECT_EQ(TruncateAtWord("abc   \t\n def", 10), "abc\xE2\x80\xA6");
}

TEST(TruncateAtWordTest, ResultNeverExceedsTheBudget) {
  const std::string text = "rank 3 on node gpu-017 exited with code 127: the command lies under /home";
  for (size_t max = 0; max <= text.size() + 1; ++max) {
    EXPECT_LE(TruncateAtWord(text, max).size(), max) << max;
  }
}

TEST(TruncateAtWordTest, CutsAOverlongFirstWordAtACharacterBoundary) {
  EXPECT_EQ(TruncateAtWord("abcdefghij", 8), "abcde\xE2\x80\xA6");
  // "é" is two bytes (C3 A9): a budget of 5 would end inside the second one.
  EXPECT_EQ(TruncateAtWord("ab\xC3\xA9\xC3\xA9xyz", 8), "ab\xC3\xA9\xE2\x80\xA6");
}

TEST(TruncateAtWordTest, BelowTheMarksSizeCutsWithoutAMark) {
  EXPECT_EQ(TruncateAtWord("abc def", 2), "ab");
  EXPECT_EQ(TruncateAtWord("\xC3\xA9t\xC3\xA9", 1), "");
  EXPECT_EQ(TruncateAtWord("abc", 0), "");
}

}  // namespace
}  // namespace athanor
