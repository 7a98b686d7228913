// The notebook proxy's own HTTP parsing (notebook_proxy.cc): the login form,
// the session cookie, which job a request is for, where a login may redirect,
// and the head that is relayed to the notebook server. Pure functions over
// bytes a browser sent, apart from the proxy's sockets so that they can be
// unit tested and fuzzed (fuzz/fuzz_notebook_http.cc). Nothing here throws
// or trusts a length it did not check.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>

#include "absl/strings/string_view.h"

namespace athanor::coord::notebook_http {

// The session cookie's name.
inline constexpr char kCookie[] = "athanor_nb";
// The longest job id a path may name (longer: no such notebook).
inline constexpr size_t kMaxJobIdBytes = 64;

// Text safe inside HTML content and double- or single-quoted attributes.
std::string HtmlEscape(absl::string_view text);

// The login page: `why` says why it is shown, `next` goes back in a hidden field.
std::string LoginPage(const std::string& next, const std::string& why);

// application/x-www-form-urlencoded: name -> value ('+' is a space, %XX a
// byte; a '%' not followed by two hex digits stays as it is). The first of
// repeated names wins.
std::map<std::string, std::string> ParseForm(absl::string_view body);

// The value of cookie `name` in a Cookie header (the last, if repeated), and
// in `rest` the header without any cookie of that name.
std::string TakeCookie(absl::string_view header, absl::string_view name, std::string* rest);

// A request target's path (before any '?').
std::string TargetPath(absl::string_view target);

// The job a /notebook/<job>/... path is for; nullopt when the path is not
// under /notebook/. The id may be empty or longer than kMaxJobIdBytes: the
// caller refuses those as no such notebook.
std::optional<std::string> NotebookJobId(absl::string_view path);

// Where a login may send the browser afterwards: `next` when it is a
// notebook path of this server (no other host, no "//", no CR, LF or
// backslash), else "" (no redirect).
std::string SafeNext(const std::string& next);

// The `next` of a GET /notebook-login?next=... target ("/notebook/" when none).
std::string LoginNext(absl::string_view target);

// Turns a browser's request head into the one relayed to the notebook
// server: no Authorization, the Cookie header set to `other_cookies` (the
// browser's without the session cookie; removed when empty), and
// `Connection: close` unless it is a WebSocket upgrade. Returns the head as
// it is written on the wire.
std::string RelayedHead(boost::beast::http::request<boost::beast::http::empty_body>& req,
                        const std::string& other_cookies);

}  // namespace athanor::coord::notebook_http
