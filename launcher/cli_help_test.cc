#include "launcher/cli_help.h"

#include <gtest/gtest.h>

namespace athanor::cli {
namespace {

TEST(CliHelpTest, AlignsSummariesInOneColumn) {
  EXPECT_EQ(FormatSubcommands({{"list", "[--json]", "list them"}, {"revoke", "ID", "revoke one"}}),
            "commands:\n"
            "  list [--json]  list them\n"
            "  revoke ID      revoke one\n");
}

TEST(CliHelpTest, PutsTheSummaryOfALongSynopsisOnTheNextLine) {
  const std::string long_synopsis(49, 'x');
  EXPECT_EQ(FormatSubcommands({{"a", "", "short"}, {"b", long_synopsis, "long"}}, "admin commands"),
            "admin commands:\n"
            "  a  short\n"
            "  b " + long_synopsis + "\n"
            "     long\n");
}

TEST(CliHelpTest, HelpFlagsBeforeTheJobsCommandOnly) {
  EXPECT_TRUE(IsHelpFlag("--help"));
  EXPECT_TRUE(IsHelpFlag("-h"));
  EXPECT_FALSE(IsHelpFlag("--helpful"));
  EXPECT_TRUE(AsksForHelp({"admin", "token", "--help"}));
  EXPECT_TRUE(AsksForHelp({"submit", "-h", "--", "train"}));
  EXPECT_FALSE(AsksForHelp({"submit", "--nodes", "1", "--", "train", "--help"}));
  EXPECT_FALSE(AsksForHelp({"jobs"}));
}

}  // namespace
}  // namespace athanor::cli
