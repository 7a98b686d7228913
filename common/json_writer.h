#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace athanor {

// Writes compact JSON text straight into a string, with no document tree
// built first: for records written on every state change, where building
// nlohmann::json objects (a map node and a string per key) cost more than
// the rest of the commit.
//
// Strings are taken as UTF-8. A byte that does not start a valid sequence is
// written as U+FFFD, so the text always parses; control characters, '"' and
// '\' are escaped. Numbers that are not finite are written as null.
//
//   JsonWriter w(&out);
//   w.Open('{').Key("id").Str(id).Key("gpus").Int(8).Close('}');
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& Open(char bracket);   // '{' or '['
  JsonWriter& Close(char bracket);  // '}' or ']'
  JsonWriter& Key(std::string_view key);

  JsonWriter& Str(std::string_view s);
  JsonWriter& Bool(bool b);
  JsonWriter& Real(double v);
  template <typename T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  JsonWriter& Int(T v) {
    if constexpr (std::is_signed_v<T>) return Signed(v);
    return Unsigned(v);
  }

  JsonWriter& Strs(const std::vector<std::string>& v);
  JsonWriter& StrMap(const std::map<std::string, std::string>& m);
  template <typename T>
  JsonWriter& Ints(const std::vector<T>& v) {
    Open('[');
    for (const T& x : v) Int(x);
    return Close(']');
  }

 private:
  JsonWriter& Signed(int64_t v);
  JsonWriter& Unsigned(uint64_t v);
  void Separate();  // a comma before any value or key but the first in its container
  void Quote(std::string_view s);

  std::string* out_;
  bool need_comma_ = false;
};

}  // namespace athanor
