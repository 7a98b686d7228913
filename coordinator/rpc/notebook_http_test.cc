// The notebook proxy's parsers (notebook_http.h): the login form, the session
// cookie, the job a path names, the login's redirect and the relayed head.
#include "coordinator/rpc/notebook_http.h"

#include <gtest/gtest.h>

#include <boost/beast/http/parser.hpp>

#include <map>
#include <string>

namespace athanor::coord::notebook_http {
namespace {

namespace http = boost::beast::http;

TEST(NotebookHttp, ParseFormDecodesPlusAndEscapes) {
  std::map<std::string, std::string> form = ParseForm("token=ab%2Bc+d&next=%2Fnotebook%2Fj1%2F&&empty=&bare");
  EXPECT_EQ(form, (std::map<std::string, std::string>{
                      {"token", "ab+c d"}, {"next", "/notebook/j1/"}, {"empty", ""}, {"bare", ""}}));
}

TEST(NotebookHttp, ParseFormKeepsBadEscapesAndTheFirstOfRepeats) {
  EXPECT_EQ(ParseForm("a=%-1%+f%4%zz%&a=second"), (std::map<std::string, std::string>{{"a", "%-1% f%4%zz%"}}));
  EXPECT_EQ(ParseForm("x=%41%62%00"), (std::map<std::string, std::string>{{"x", std::string("Ab\0", 3)}}));
  EXPECT_TRUE(ParseForm("").empty());
}

TEST(NotebookHttp, TakeCookieRemovesEverySessionCookie) {
  std::string rest;
  EXPECT_EQ(TakeCookie("_xsrf=x1; athanor_nb=s1 ;other=o; athanor_nb=s2", kCookie, &rest), "s2");
  EXPECT_EQ(rest, "_xsrf=x1; other=o");
  EXPECT_EQ(TakeCookie("athanor_nbx=1; xathanor_nb=2", kCookie, &rest), "");
  EXPECT_EQ(rest, "athanor_nbx=1; xathanor_nb=2");
  EXPECT_EQ(TakeCookie("athanor_nb=only", kCookie, &rest), "only");
  EXPECT_EQ(rest, "");
  EXPECT_EQ(TakeCookie("", kCookie, &rest), "");
  EXPECT_EQ(rest, "");
}

TEST(NotebookHttp, PathsNameTheirJob) {
  EXPECT_EQ(TargetPath("/notebook/j7/api/kernels?x=/y"), "/notebook/j7/api/kernels");
  EXPECT_EQ(NotebookJobId("/notebook/j7/api/kernels"), "j7");
  EXPECT_EQ(NotebookJobId("/notebook/j7"), "j7");
  EXPECT_EQ(NotebookJobId("/notebook/"), "");
  EXPECT_EQ(NotebookJobId("/notebook"), std::nullopt);
  EXPECT_EQ(NotebookJobId("/dashboard/notebook/j7/"), std::nullopt);
}

TEST(NotebookHttp, LoginRedirectsOnlyToNotebookPaths) {
  EXPECT_EQ(SafeNext("/notebook/j1/tree"), "/notebook/j1/tree");
  EXPECT_EQ(SafeNext("https://evil.example/notebook/"), "");
  EXPECT_EQ(SafeNext("/notebook//evil.example"), "");
  EXPECT_EQ(SafeNext("/notebook/j1\r\nSet-Cookie: x=1"), "");
  EXPECT_EQ(SafeNext("/notebook/\\evil"), "");
  EXPECT_EQ(LoginNext("/notebook-login"), "/notebook/");
  EXPECT_EQ(LoginNext("/notebook-login?next=%2Fnotebook%2Fj2%2Ftree"), "/notebook/j2/tree");
  EXPECT_EQ(LoginPage("\"><script>", "why & how"),
            "<!doctype html><html><head><meta charset=utf-8><title>athanor notebook login</title></head><body>"
            "<h1>athanor notebooks</h1><p>why &amp; how</p>"
            "<form method=post action=\"/notebook-login\">"
            "<label>Token <input type=password name=token autocomplete=off></label>"
            "<input type=hidden name=next value=\"&quot;&gt;&lt;script&gt;\">"
            "<button type=submit>Log in</button></form></body></html>");
}

http::request<http::empty_body> Parse(const std::string& head) {
  http::request_parser<http::empty_body> parser;
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(head), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
  return parser.release();
}

TEST(NotebookHttp, RelayedHeadDropsCredentials) {
  http::request<http::empty_body> req =
      Parse("GET /notebook/j1/tree HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer secret\r\n"
            "Cookie: athanor_nb=s; _xsrf=x\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(RelayedHead(req, "_xsrf=x"),
            "GET /notebook/j1/tree HTTP/1.1\r\nHost: h\r\nCookie: _xsrf=x\r\nConnection: close\r\n\r\n");
  http::request<http::empty_body> bare =
      Parse("GET /notebook/j1/ HTTP/1.1\r\nCookie: athanor_nb=s\r\nauthorization: a\r\nAuthorization: b\r\n\r\n");
  EXPECT_EQ(RelayedHead(bare, ""), "GET /notebook/j1/ HTTP/1.1\r\nConnection: close\r\n\r\n");
}

TEST(NotebookHttp, RelayedHeadKeepsAWebSocketUpgrade) {
  http::request<http::empty_body> req =
      Parse("GET /notebook/j1/api/kernels/k/channels HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
            "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Cookie: athanor_nb=s\r\n\r\n");
  EXPECT_EQ(RelayedHead(req, ""),
            "GET /notebook/j1/api/kernels/k/channels HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
            "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
}

}  // namespace
}  // namespace athanor::coord::notebook_http
