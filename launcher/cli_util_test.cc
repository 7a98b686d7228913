#include "launcher/cli_util.h"

#include <gtest/gtest.h>

#include <map>

namespace athanor::cli {
namespace {

TEST(CliUtilTest, ParsesDurations) {
  EXPECT_EQ(ParseDurationSeconds("90"), 90);
  EXPECT_EQ(ParseDurationSeconds("30s"), 30);
  EXPECT_EQ(ParseDurationSeconds("10m"), 600);
  EXPECT_EQ(ParseDurationSeconds("1h"), 3600);
  EXPECT_EQ(ParseDurationSeconds("2d"), 172800);
  EXPECT_EQ(ParseDurationSeconds(""), std::nullopt);
  EXPECT_EQ(ParseDurationSeconds("m"), std::nullopt);
  EXPECT_EQ(ParseDurationSeconds("-5s"), std::nullopt);
  EXPECT_EQ(ParseDurationSeconds("1.5h"), std::nullopt);
}

TEST(CliUtilTest, ParsesSizesInMegabytes) {
  EXPECT_EQ(ParseMegabytes("4096"), 4096);
  EXPECT_EQ(ParseMegabytes("512M"), 512);
  EXPECT_EQ(ParseMegabytes("80G"), 81920);
  EXPECT_EQ(ParseMegabytes("80GB"), 81920);
  EXPECT_EQ(ParseMegabytes("1T"), 1048576);
  EXPECT_EQ(ParseMegabytes("G"), std::nullopt);
  EXPECT_EQ(ParseMegabytes("x1"), std::nullopt);
}

TEST(CliUtilTest, ParsesNodeRanges) {
  struct Case {
    std::string text;
    int32_t min, max;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"3", 0, 3, ""},
           {"2:3", 2, 3, ""},
           {"4:4", 0, 4, ""},  // MIN == MAX: a fixed gang
           {"1:16", 1, 16, ""},
           {"3:2", 0, 0, "--nodes: MIN 3 is more than MAX 2 in '3:2'"},
           {"0:2", 0, 0, "--nodes: expected N or MIN:MAX (counts >= 1), got '0:2'"},
           {"2:", 0, 0, "--nodes: expected N or MIN:MAX (counts >= 1), got '2:'"},
           {"x", 0, 0, "--nodes: expected N or MIN:MAX (counts >= 1), got 'x'"},
           {"0", 0, 0, "--nodes: expected N or MIN:MAX (counts >= 1), got '0'"},
           {"1:2:3", 0, 0, "--nodes: expected N or MIN:MAX (counts >= 1), got '1:2:3'"},
       }) {
    absl::StatusOr<NodeRange> r = ParseNodeRange(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << c.text << ": " << r.status();
      EXPECT_EQ(r->min, c.min) << c.text;
      EXPECT_EQ(r->max, c.max) << c.text;
    } else {
      EXPECT_EQ(r.status().message(), c.error) << c.text;
    }
  }
}

TEST(CliUtilTest, ParsesSinceAsDateOrDurationAgo) {
  EXPECT_EQ(ParseSince("2026-01-31", 0), 1769817600);
  EXPECT_EQ(ParseSince("2026-01-31T12:00:00Z", 0), 1769860800);
  EXPECT_EQ(ParseSince("2026-01-31T12:00:00", 0), 1769860800);
  EXPECT_EQ(ParseSince("12h", 1769860800), 1769817600);
  EXPECT_EQ(ParseSince("yesterday", 0), std::nullopt);
  EXPECT_EQ(ParseSince("2026-01-31junk", 0), std::nullopt);
}

TEST(CliUtilTest, ParsesEnvAssignments) {
  std::map<std::string, std::string> env;
  EXPECT_TRUE(ParseEnvAssignment("A_1=x=y", &env).ok());
  EXPECT_TRUE(ParseEnvAssignment("_B=", &env).ok());
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"A_1", "x=y"}, {"_B", ""}}));
  for (const std::string& bad : std::vector<std::string>{"NOEQ", "=v", "1A=v", "A B=v", "A-B=v", std::string("A=v\0w", 5)}) {
    absl::Status s = ParseEnvAssignment(bad, &env);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(env.size(), 2u);
  EXPECT_EQ(ParseSince(std::string("2026-01-31\0junk", 15), 0), std::nullopt);
}

TEST(CliUtilTest, ParsesVolumeArguments) {
  absl::StatusOr<VolumeArg> v = ParseVolumeArg("data:/mnt/data");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->name, "data");
  EXPECT_EQ(v->path, "/mnt/data");
  EXPECT_FALSE(v->read_only);
  v = ParseVolumeArg("w:/w:ro");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->read_only);
  EXPECT_FALSE(ParseVolumeArg("w:/w:rw")->read_only);
  EXPECT_EQ(ParseVolumeArg("nopath").status().message(),
            "--volume expects NAME:/path[:ro], got 'nopath': no ':/path'");
  EXPECT_EQ(ParseVolumeArg(":/x").status().message(),
            "--volume expects NAME:/path[:ro], got ':/x': the volume's name is empty");
  EXPECT_EQ(ParseVolumeArg("a:/x:rx").status().message(),
            "--volume expects NAME:/path[:ro], got 'a:/x:rx': the mode 'rx' is neither ro nor rw");
  EXPECT_EQ(ParseVolumeArg("a:x").status().message(),
            "--volume expects NAME:/path[:ro], got 'a:x': the path is not absolute");
}

}  // namespace
}  // namespace athanor::cli
