#include "common/json_writer.h"

#include <charconv>
#include <cmath>

namespace athanor {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0
// when it is not one (overlong forms, surrogates and code points past
// U+10FFFF included).
size_t ValidSequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (!IsContinuation(at(i + k))) return 0;
  }
  return len;
}

}  // namespace

void JsonWriter::Separate() {
  if (need_comma_) out_->push_back(',');
  need_comma_ = true;
}

JsonWriter& JsonWriter::Open(char bracket) {
  Separate();
  out_->push_back(bracket);
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::Close(char bracket) {
  out_->push_back(bracket);
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  Separate();
  Quote(key);
  out_->push_back(':');
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::Str(std::string_view s) {
  Separate();
  Quote(s);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool b) {
  Separate();
  out_->append(b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Signed(int64_t v) {
  Separate();
  char buf[24];
  out_->append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Unsigned(uint64_t v) {
  Separate();
  char buf[24];
  out_->append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Real(double v) {
  Separate();
  if (!std::isfinite(v)) {
    out_->append("null");
    return *this;
  }
  // Negative zero is written as 0: "-0" reads back as the integer 0, so it
  // would not survive a second round trip unchanged.
  if (v == 0) v = 0;
  // The shortest text that reads back as the same double.
  char buf[32];
  out_->append(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
  return *this;
}

JsonWriter& JsonWriter::Strs(const std::vector<std::string>& v) {
  Open('[');
  for (const std::string& s : v) Str(s);
  return Close(']');
}

JsonWriter& JsonWriter::StrMap(const std::map<std::string, std::string>& m) {
  Open('{');
  for (const auto& [k, v] : m) Key(k).Str(v);
  return Close('}');
}

void JsonWriter::Quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_->push_back('"');
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 1;
    if (c >= 0x80) {
      len = ValidSequence(s, i);
      if (len > 0) {
        i += len;
        continue;
      }
      len = 1;
    }
    out_->append(s.data() + run, i - run);
    switch (c) {
      case '"': out_->append("\\\""); break;
      case '\\': out_->append("\\\\"); break;
      case '\n': out_->append("\\n"); break;
      case '\r': out_->append("\\r"); break;
      case '\t': out_->append("\\t"); break;
      case '\b': out_->append("\\b"); break;
      case '\f': out_->append("\\f"); break;
      default:
        if (c < 0x20) {
          const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out_->append(esc, sizeof(esc));
        } else {
          out_->append(kReplacement);  // not valid UTF-8
        }
    }
    i += len;
    run = i;
  }
  out_->append(s.data() + run, s.size() - run);
  out_->push_back('"');
}

}  // namespace athanor
