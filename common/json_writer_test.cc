#include "common/json_writer.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace athanor {
namespace {

std::string Quoted(std::string_view s) {
  std::string out;
  JsonWriter(&out).Str(s);
  return out;
}

TEST(JsonWriterTest, CommasGoBetweenValuesAndKeysOfEachContainer) {
  std::string out;
  JsonWriter w(&out);
  w.Open('{').Key("a").Int(1).Key("b").Open('[').Int(-2).Real(0.5).Bool(true).Str("x");
  w.Open('[').Close(']').Open('{').Close('}').Close(']');
  w.Key("c").StrMap({{"k", "v"}, {"l", ""}}).Key("d").Strs({}).Key("e").Ints(std::vector<int32_t>{3, 4});
  w.Close('}');
  EXPECT_EQ(out, R"({"a":1,"b":[-2,0.5,true,"x",[],{}],"c":{"k":"v","l":""},"d":[],"e":[3,4]})");
}

TEST(JsonWriterTest, NumbersAreExactAndNonFiniteOnesAreNull) {
  std::string out;
  JsonWriter w(&out);
  w.Open('[').Int(std::numeric_limits<int64_t>::min()).Int(std::numeric_limits<uint64_t>::max());
  w.Int(int32_t{0}).Real(0.1).Real(1e300).Real(-2.0).Real(5e-324);
  w.Real(std::nan("")).Real(std::numeric_limits<double>::infinity()).Close(']');
  EXPECT_EQ(out, "[-9223372036854775808,18446744073709551615,0,0.1,1e+300,-2,5e-324,null,null]");
  nlohmann::json back = nlohmann::json::parse(out);
  EXPECT_EQ(back[3].get<double>(), 0.1);
  EXPECT_EQ(back[6].get<double>(), 5e-324);
}

TEST(JsonWriterTest, NegativeZeroIsWrittenAsZero) {
  std::string out;
  JsonWriter w(&out);
  w.Open('[').Real(-0.0).Real(0.0).Close(']');
  EXPECT_EQ(out, "[0,0]");
}

TEST(JsonWriterTest, QuotesBackslashesAndControlCharactersAreEscaped) {
  EXPECT_EQ(Quoted("a\"b\\c/"), R"("a\"b\\c/")");
  EXPECT_EQ(Quoted("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Quoted(std::string("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
}

TEST(JsonWriterTest, ValidUtf8PassesAndInvalidBytesBecomeReplacementCharacters) {
  const std::string ok = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";
  EXPECT_EQ(Quoted(ok), "\"" + ok + "\"");
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(Quoted("\xC0\xAF"), "\"" + r + r + "\"");                 // overlong '/'
  EXPECT_EQ(Quoted("\xE0\x80\xAF"), "\"" + r + r + r + "\"");          // overlong, 3 bytes
  EXPECT_EQ(Quoted("a\xED\xA0\x80z"), "\"a" + r + r + r + "z\"");      // a surrogate
  EXPECT_EQ(Quoted("\xF4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // past U+10FFFF
  EXPECT_EQ(Quoted("x\xE2\x82"), "\"x" + r + r + "\"");                // cut short
  EXPECT_EQ(Quoted("\x80\xFF"), "\"" + r + r + "\"");                  // stray bytes
}

TEST(JsonWriterTest, EveryByteReadsBackAsItselfOrTheReplacementCharacter) {
  for (int c = 0; c < 256; ++c) {
    const std::string in(1, static_cast<char>(c));
    nlohmann::json back = nlohmann::json::parse(Quoted(in));
    EXPECT_EQ(back.get<std::string>(), c < 0x80 ? in : "\xEF\xBF\xBD") << "byte " << c;
  }
}

}  // namespace
}  // namespace athanor
