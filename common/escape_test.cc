#include "common/escape.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(EscapeControls, EveryControlCharacterAndDelBecomeHexUtf8IsKept) {
  EXPECT_EQ(EscapeControls("a\x1b[2Jb\rc\nd\x7f\xc3\xa9"), "a\\x1b[2Jb\\x0dc\\x0ad\\x7f\xc3\xa9");
  EXPECT_EQ(EscapeControls(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(EscapeControls("\t\x1f "), "\\x09\\x1f ");
  EXPECT_EQ(EscapeControls("plain text, 100% printable ~"), "plain text, 100% printable ~");
  EXPECT_EQ(EscapeControls(""), "");
}

TEST(EscapeControls, ACommandIsEscapedWordByWord) {
  EXPECT_EQ(EscapeCommand({"sh", "-c", "echo hi\n2024 [INFO] forged line"}),
            "sh -c echo hi\\x0a2024 [INFO] forged line");
  EXPECT_EQ(EscapeCommand({}), "");
}

}  // namespace
}  // namespace athanor
