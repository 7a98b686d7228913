#include "common/uri.h"

#include <charconv>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace athanor {
namespace {

absl::StatusOr<std::string> PercentDecode(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) {
        return absl::InvalidArgumentError(absl::StrCat("truncated percent escape in '", in, "'"));
      }
      int value = 0;
      auto [ptr, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16);
      if (ec != std::errc() || ptr != in.data() + i + 3) {
        return absl::InvalidArgumentError(absl::StrCat("bad percent escape in '", in, "'"));
      }
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(in[i] == '+' ? ' ' : in[i]);
    }
  }
  return out;
}

std::string PercentEncode(absl::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : in) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' || c == ':') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace

std::string Uri::ToString() const {
  // A bare file path prints as itself: it may hold '?' or '%', which a
  // file:// URI would read as a query or an escape.
  if (scheme == "file" && host.empty() && query.empty() && !path.empty() &&
      (path.front() == '/' || path.front() == '.') && path.find("://") == std::string::npos) {
    return path;
  }
  std::string out = absl::StrCat(scheme, "://", host, path);
  char sep = '?';
  for (const auto& [k, v] : query) {
    absl::StrAppend(&out, std::string(1, sep), PercentEncode(k), "=", PercentEncode(v));
    sep = '&';
  }
  return out;
}

absl::StatusOr<Uri> ParseUri(absl::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty URI");
  Uri uri;
  size_t sep = text.find("://");
  if (sep == absl::string_view::npos) {
    if (text.front() != '/' && text.front() != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("URI '", text, "' has no scheme (expected e.g. file:///path or s3://bucket/prefix)"));
    }
    uri.scheme = "file";
    uri.path = std::string(text);
    return uri;
  }
  uri.scheme = std::string(text.substr(0, sep));
  if (uri.scheme.empty()) return absl::InvalidArgumentError(absl::StrCat("URI '", text, "' has an empty scheme"));
  absl::string_view rest = text.substr(sep + 3);
  size_t q = rest.find('?');
  absl::string_view query = q == absl::string_view::npos ? absl::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  size_t slash = rest.find('/');
  uri.host = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) uri.path = std::string(rest.substr(slash));
  size_t at = uri.host.rfind('@');
  if (at != std::string::npos) uri.host = uri.host.substr(at + 1);
  if (!query.empty()) {
    for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
      size_t eq = part.find('=');
      auto key = PercentDecode(part.substr(0, eq));
      if (!key.ok()) return key.status();
      std::string value;
      if (eq != absl::string_view::npos) {
        auto v = PercentDecode(part.substr(eq + 1));
        if (!v.ok()) return v.status();
        value = *v;
      }
      uri.query[*key] = value;
    }
  }
  return uri;
}

absl::Status SplitHostPort(absl::string_view text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "' has no port (expected HOST:PORT)"));
  }
  absl::string_view h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  absl::string_view ps = text.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), p);
  if (ec != std::errc() || ptr != ps.data() + ps.size() || p < 1 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "' has a bad port '", ps, "'"));
  }
  *host = std::string(h.empty() ? "127.0.0.1" : h);
  *port = p;
  return absl::OkStatus();
}

}  // namespace athanor
