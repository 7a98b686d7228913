#include "checkpoint/s3/xml.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace athanor::xml {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Does the tag starting at doc[pos] ('<' already at pos) name `tag`? Sets
// *end to the index after '>' and *self_closing.
bool MatchOpen(absl::string_view doc, size_t pos, absl::string_view tag, size_t* end,
               bool* self_closing) {
  size_t name_begin = pos + 1;
  size_t name_end = name_begin;
  while (name_end < doc.size() && doc[name_end] != '>' && doc[name_end] != ' ' &&
         doc[name_end] != '/' && doc[name_end] != '\t' && doc[name_end] != '\n' && doc[name_end] != '\r') {
    ++name_end;
  }
  absl::string_view name = doc.substr(name_begin, name_end - name_begin);
  size_t colon = name.find(':');
  if (colon != absl::string_view::npos) name = name.substr(colon + 1);
  if (name != tag) return false;
  size_t close = doc.find('>', name_end);
  if (close == absl::string_view::npos) return false;
  *self_closing = close > 0 && doc[close - 1] == '/';
  *end = close + 1;
  return true;
}

}  // namespace

std::vector<std::string> Elements(absl::string_view doc, absl::string_view tag) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = doc.find('<', pos)) != absl::string_view::npos) {
    size_t body = 0;
    bool self_closing = false;
    if (pos + 1 < doc.size() && doc[pos + 1] != '/' && MatchOpen(doc, pos, tag, &body, &self_closing)) {
      if (self_closing) {
        out.emplace_back();
        pos = body;
        continue;
      }
      // Find the matching close tag, counting nested same-name elements.
      int depth = 1;
      size_t scan = body;
      while (depth > 0) {
        size_t lt = doc.find('<', scan);
        if (lt == absl::string_view::npos) return out;  // truncated document
        size_t inner_end = 0;
        bool inner_self = false;
        if (lt + 1 < doc.size() && doc[lt + 1] == '/') {
          size_t gt = doc.find('>', lt);
          if (gt == absl::string_view::npos) return out;
          absl::string_view name = doc.substr(lt + 2, gt - lt - 2);
          size_t colon = name.find(':');
          if (colon != absl::string_view::npos) name = name.substr(colon + 1);
          if (name == tag && --depth == 0) {
            out.emplace_back(doc.substr(body, lt - body));
            pos = gt + 1;
            break;
          }
          scan = gt + 1;
        } else if (MatchOpen(doc, lt, tag, &inner_end, &inner_self)) {
          if (!inner_self) ++depth;
          scan = inner_end;
        } else {
          scan = lt + 1;
        }
      }
      continue;
    }
    ++pos;
  }
  return out;
}

std::string Text(absl::string_view doc, absl::string_view tag) {
  std::vector<std::string> found = Elements(doc, tag);
  return found.empty() ? std::string() : Unescape(found.front());
}

std::string Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == absl::string_view::npos) {
      out.push_back('&');
      continue;
    }
    absl::string_view entity = text.substr(i + 1, semi - i - 1);
    if (entity == "amp") out.push_back('&');
    else if (entity == "lt") out.push_back('<');
    else if (entity == "gt") out.push_back('>');
    else if (entity == "quot") out.push_back('"');
    else if (entity == "apos") out.push_back('\'');
    else if (!entity.empty() && entity[0] == '#') {
      std::string digits(entity.substr(1));
      bool hex = !digits.empty() && (digits[0] == 'x' || digits[0] == 'X');
      AppendUtf8(static_cast<uint32_t>(std::strtoul(digits.c_str() + (hex ? 1 : 0), nullptr, hex ? 16 : 10)),
                 &out);
    } else {
      out.append(text.substr(i, semi - i + 1).data(), semi - i + 1);
    }
    i = semi;
  }
  return out;
}

std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace athanor::xml
