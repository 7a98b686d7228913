#include "worker/agent/notebook_probe.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace athanor::agent {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using json = nlohmann::json;

// Jupyter writes "2026-12-03T23:03:32.391193Z".
bool ParseIsoTime(const std::string& text, int64_t* unix) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return false;
  *unix = absl::ToUnixSeconds(t);
  return true;
}

}  // namespace

absl::StatusOr<KernelActivity> ParseKernels(const std::string& body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("api/kernels: the reply is not JSON");
  if (!doc.is_array()) return absl::InvalidArgumentError("api/kernels: the reply is not a JSON array");
  KernelActivity out;
  for (const json& k : doc) {
    if (!k.is_object()) return absl::InvalidArgumentError("api/kernels: an entry is not an object");
    auto state = k.find("execution_state");
    if (state != k.end() && state->is_string() && state->get<std::string>() == "busy") ++out.busy;
    auto last = k.find("last_activity");
    if (last != k.end() && last->is_string()) {
      int64_t at = 0;
      if (!ParseIsoTime(last->get<std::string>(), &at)) {
        return absl::InvalidArgumentError("api/kernels: last_activity is not an RFC 3339 time");
      }
      out.last_activity_unix = std::max(out.last_activity_unix, at);
    }
  }
  return out;
}

absl::StatusOr<KernelActivity> ProbeKernels(const std::string& socket_path, const std::string& base_url,
                                            const std::string& token, int timeout_ms) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("notebook socket path is ", socket_path.size(),
                                                   " bytes; at most ", sizeof(addr.sun_path) - 1));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", socket_path, ": ", strerror(e)));
  }
  asio::io_context io;
  asio::local::stream_protocol::socket sock(io);
  boost::system::error_code ec;
  sock.assign(asio::local::stream_protocol(), fd, ec);
  if (ec) {
    close(fd);
    return absl::InternalError(absl::StrCat("notebook socket: ", ec.message()));
  }
  http::request<http::empty_body> req{http::verb::get, base_url + "api/kernels", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::authorization, "token " + token);
  req.set(http::field::connection, "close");
  http::write(sock, req, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("notebook api/kernels: send: ", ec.message()));
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(kMaxKernelReplyBytes);
  http::read(sock, buffer, parser, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("notebook api/kernels: read: ", ec.message()));
  const auto& res = parser.get();
  if (res.result_int() != 200) {
    return absl::InternalError(absl::StrCat("notebook api/kernels: HTTP ", res.result_int()));
  }
  return ParseKernels(res.body());
}

}  // namespace athanor::agent
