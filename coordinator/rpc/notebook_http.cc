#include "coordinator/rpc/notebook_http.h"

#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace athanor::coord::notebook_http {

namespace http = boost::beast::http;

namespace {

int HexValue(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

// '+' and %XX decoded. Only two hex digits make an escape: "%-1" or "%+f"
// (which a signed number parser would take) stay as they are.
std::string FormDecode(absl::string_view s) {
  std::string r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      r += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      r += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      r += s[i];
    }
  }
  return r;
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string LoginPage(const std::string& next, const std::string& why) {
  return absl::StrCat(
      "<!doctype html><html><head><meta charset=utf-8><title>athanor notebook login</title></head><body>"
      "<h1>athanor notebooks</h1><p>", HtmlEscape(why), "</p>"
      "<form method=post action=\"/notebook-login\">"
      "<label>Token <input type=password name=token autocomplete=off></label>"
      "<input type=hidden name=next value=\"", HtmlEscape(next), "\">"
      "<button type=submit>Log in</button></form></body></html>");
}

std::map<std::string, std::string> ParseForm(absl::string_view body) {
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(body, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    out.emplace(FormDecode(kv.first), FormDecode(kv.second));
  }
  return out;
}

std::string TakeCookie(absl::string_view header, absl::string_view name, std::string* rest) {
  std::string found;
  std::vector<absl::string_view> kept;
  const std::string prefix = absl::StrCat(name, "=");
  for (absl::string_view part : absl::StrSplit(header, ';', absl::SkipWhitespace())) {
    absl::string_view p = absl::StripAsciiWhitespace(part);
    if (absl::StartsWith(p, prefix)) {
      found = std::string(p.substr(prefix.size()));
    } else {
      kept.push_back(p);
    }
  }
  *rest = absl::StrJoin(kept, "; ");
  return found;
}

std::string TargetPath(absl::string_view target) { return std::string(target.substr(0, target.find('?'))); }

std::optional<std::string> NotebookJobId(absl::string_view path) {
  if (!absl::ConsumePrefix(&path, "/notebook/")) return std::nullopt;
  return std::string(path.substr(0, path.find('/')));
}

std::string SafeNext(const std::string& next) {
  if (!absl::StartsWith(next, "/notebook/") || next.find("//") != std::string::npos ||
      next.find_first_of("\r\n\\") != std::string::npos) {
    return "";
  }
  return next;
}

std::string LoginNext(absl::string_view target) {
  size_t q = target.find("?next=");
  if (q == absl::string_view::npos) return "/notebook/";
  return ParseForm(target.substr(q + 1))["next"];
}

std::string RelayedHead(http::request<http::empty_body>& req, const std::string& other_cookies) {
  req.erase(http::field::authorization);
  if (other_cookies.empty()) {
    req.erase(http::field::cookie);
  } else {
    req.set(http::field::cookie, other_cookies);
  }
  if (!boost::beast::websocket::is_upgrade(req)) req.set(http::field::connection, "close");
  std::ostringstream head;
  head << req.base();
  return head.str();
}

}  // namespace athanor::coord::notebook_http
