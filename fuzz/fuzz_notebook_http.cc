// Fuzzes the notebook proxy's parsers (coordinator/rpc/notebook_http.h) with
// what a browser sends. The input's first line is a form body (and a Cookie
// header); the rest is a request head, parsed by Beast as the proxy does and
// rewritten for the notebook server. The relayed head must parse again, with
// the same method and target, no Authorization header and no session cookie.
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/http/parser.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "coordinator/rpc/notebook_http.h"

namespace http = boost::beast::http;
namespace nb = athanor::coord::notebook_http;

namespace {

constexpr size_t kMaxHeadBytes = 16 * 1024;  // NotebookProxy::kMaxHeadBytes

bool ParseHead(const std::string& bytes, http::request_parser<http::empty_body>* parser) {
  parser->header_limit(kMaxHeadBytes);
  parser->eager(false);
  boost::system::error_code ec;
  parser->put(boost::asio::buffer(bytes), ec);
  return !ec && parser->is_header_done();
}

void CheckCookie(absl::string_view header) {
  std::string rest;
  nb::TakeCookie(header, nb::kCookie, &rest);
  for (absl::string_view part : absl::StrSplit(rest, "; ")) {
    if (absl::StartsWith(part, std::string(nb::kCookie) + "=")) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t nl = text.find('\n');
  std::string first = text.substr(0, nl);
  std::string head = nl == std::string::npos ? "" : text.substr(nl + 1);

  // The login form and page, a GET's next, the redirect and a Cookie header.
  for (const auto& [name, value] : nb::ParseForm(first)) {
    std::string next = nb::SafeNext(value);
    if (!next.empty() && (!absl::StartsWith(next, "/notebook/") || absl::StrContains(next, "//") ||
                          next.find_first_of("\r\n\\") != std::string::npos)) {
      __builtin_trap();
    }
    nb::LoginPage(name, value);
    if (nb::HtmlEscape(value).find_first_of("<>\"'") != std::string::npos) __builtin_trap();
  }
  nb::LoginNext(first);
  CheckCookie(first);
  std::optional<std::string> job = nb::NotebookJobId(nb::TargetPath(first));
  if (job && job->find('/') != std::string::npos) __builtin_trap();

  http::request_parser<http::empty_body> parser;
  if (!ParseHead(head, &parser)) return 0;
  http::request<http::empty_body> req = parser.release();
  const std::string method(req.method_string());
  const std::string target(req.target());
  std::string cookies;
  nb::TakeCookie(std::string(req[http::field::cookie]), nb::kCookie, &cookies);
  std::string relayed = nb::RelayedHead(req, cookies);

  http::request_parser<http::empty_body> again;
  if (!ParseHead(relayed, &again)) __builtin_trap();
  const http::request<http::empty_body>& out = again.get();
  if (std::string(out.method_string()) != method || std::string(out.target()) != target) __builtin_trap();
  if (out.count(http::field::authorization) != 0) __builtin_trap();
  if (out.count(http::field::cookie) > 1) __builtin_trap();
  CheckCookie(std::string(out[http::field::cookie]));
  return 0;
}
