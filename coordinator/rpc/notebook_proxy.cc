#include "coordinator/rpc/notebook_proxy.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "coordinator/core/core_reads.h"
#include "coordinator/rpc/notebook_http.h"
#include "coordinator/rpc/notebook_sessions.h"
#include "proto/athanor_interactive.grpc.pb.h"
#include "security/cluster_ca.h"

namespace athanor::coord {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using notebook_http::kCookie;
using notebook_http::LoginPage;
using notebook_http::ParseForm;

namespace {

constexpr size_t kMaxChunk = 64 * 1024;
constexpr size_t kMaxQueuedBytes = 16 << 20;  // from the agent, not yet sent to the browser

}  // namespace

class NotebookProxy::Impl {
 public:
  explicit Impl(NotebookProxyOptions o)
      : options_(std::move(o)), sessions_(options_.session_ttl_s), ssl_(ssl::context::tls_server) {}

  absl::Status Listen() {
    ssl_.set_options(ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                     ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    boost::system::error_code ec;
    ssl_.use_certificate_chain(asio::buffer(options_.tls.cert_pem), ec);
    if (!ec) ssl_.use_private_key(asio::buffer(options_.tls.key_pem), ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("notebook proxy: TLS certificate: ", ec.message()));
    size_t colon = options_.listen.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(options_.listen.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--notebook-listen: expected HOST:PORT, got '",
                                                     options_.listen, "'"));
    }
    std::string host = options_.listen.substr(0, colon);
    if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) host = host.substr(1, host.size() - 2);
    asio::ip::address addr = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--notebook-listen: '", host, "' is not an IP address"));
    tcp::endpoint ep(addr, static_cast<uint16_t>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("--notebook-listen ", options_.listen, ": ", ec.message()));
    port_ = acceptor_.local_endpoint().port();
    StartAccept();
    acceptor_thread_ = std::thread([this] { accept_io_.run(); });
    return absl::OkStatus();
  }

  ~Impl() {
    stopping_ = true;
    // A blocked accept() is not woken by a close from another thread: the
    // acceptor is asynchronous, and closed on its own thread.
    asio::post(accept_io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
    });
    if (acceptor_thread_.joinable()) acceptor_thread_.join();
    absl::MutexLock lock(&mu_);
    for (Conn* c : conns_) c->Stop();
    mu_.Await(absl::Condition(this, &Impl::NoConnections));
  }

  int port() const { return port_; }

 private:
  bool NoConnections() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return conns_.empty(); }

  // One browser connection (see the header's thread model).
  struct Conn {
    asio::io_context io;
    absl::Mutex mu;  // Stop may come from the destructor's thread
    grpc::ClientContext* ctx ABSL_GUARDED_BY(mu) = nullptr;
    bool stopped ABSL_GUARDED_BY(mu) = false;
    beast::tcp_stream* tcp = nullptr;  // io thread only
    // Ends the connection: the tunnel is cancelled and the socket closed on
    // the io thread, so that every coroutine and the tunnel's reader finish.
    void Stop() {
      absl::MutexLock lock(&mu);
      stopped = true;
      if (ctx != nullptr) ctx->TryCancel();
      asio::post(io, [this] {
        if (tcp != nullptr) tcp->close();
      });
    }
  };

  // Accepts the next connection on the acceptor's thread (accept_io_).
  // A connection being accepted. Its socket belongs to the connection's
  // io_context and must go first (members end in reverse order).
  struct Pending {
    std::unique_ptr<Conn> conn = std::make_unique<Conn>();
    std::unique_ptr<tcp::socket> sock = std::make_unique<tcp::socket>(conn->io);
  };

  void StartAccept() {
    auto p = std::make_shared<Pending>();
    acceptor_.async_accept(*p->sock, [this, p](boost::system::error_code ec) {
      if (stopping_ || ec == asio::error::operation_aborted) return;
      if (ec) {
        ATHANOR_LOG(WARNING) << "notebook proxy: accept: " << ec.message();
        StartAccept();
        return;
      }
      Conn* c = p->conn.get();
      bool full = false;
      {
        absl::MutexLock lock(&mu_);
        full = conns_.size() >= static_cast<size_t>(options_.max_connections);
        if (!full) conns_.insert(c);
      }
      if (full) {
        ATHANOR_LOG(WARNING) << "notebook proxy: " << options_.max_connections
                             << " connections open (the most); one refused";
        StartAccept();
        return;  // p's socket closes with it
      }
      p->conn.release();  // the connection's thread owns both now
      std::thread([this, c, sock = std::move(p->sock)]() mutable {
        Serve(c, std::move(sock));
        absl::MutexLock l(&mu_);
        conns_.erase(c);
        delete c;
      }).detach();
      StartAccept();
    });
  }

  // `sock` (of c->io) ends before the thread deletes c.
  void Serve(Conn* c, std::unique_ptr<tcp::socket> sock) {
    TlsStream stream(beast::tcp_stream(std::move(*sock)), ssl_);
    c->tcp = &beast::get_lowest_layer(stream);
    asio::co_spawn(c->io, Handle(c, stream), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        ATHANOR_LOG(DEBUG) << "notebook proxy: connection ended: " << ex.what();
      }
    });
    c->io.run();
  }

  template <class Body>
  static awaitable<void> Reply(TlsStream& stream, http::response<Body>& res) {
    res.set(http::field::connection, "close");
    res.set(http::field::cache_control, "no-store");
    res.prepare_payload();
    co_await http::async_write(stream, res, use_awaitable);
    boost::system::error_code ec;
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
    co_await stream.async_shutdown(asio::redirect_error(use_awaitable, ec));
  }

  static awaitable<void> Text(TlsStream& stream, int status, const std::string& body,
                              const std::string& type = "text/plain; charset=utf-8") {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, type);
    res.body() = body + (absl::EndsWith(body, "\n") || absl::StartsWith(type, "text/html") ? "" : "\n");
    co_await Reply(stream, res);
  }

  awaitable<void> Handle(Conn* c, TlsStream& stream) {
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(kIdleHeadS));
    co_await stream.async_handshake(ssl::stream_base::server, use_awaitable);
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kMaxHeadBytes);
    boost::system::error_code ec;
    co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == http::error::header_limit) {
        co_await Text(stream, 431, absl::StrCat("request head over ", kMaxHeadBytes, " bytes"));
      } else if (ec != http::error::end_of_stream && ec != asio::error::eof) {
        co_await Text(stream, 400, absl::StrCat("bad request: ", ec.message()));
      }
      co_return;
    }
    http::request<http::empty_body>& req = parser.get();
    std::string target(req.target());
    std::string path = notebook_http::TargetPath(target);
    if (path == "/notebook-login") {
      co_await Login(stream, buffer, parser);
      co_return;
    }
    std::optional<std::string> notebook_job = notebook_http::NotebookJobId(path);
    if (!notebook_job) {
      co_await Text(stream, 404, "not found: notebooks are under /notebook/<job>/ (log in at /notebook-login)");
      co_return;
    }
    const std::string job_id = std::move(*notebook_job);
    std::string rest;
    std::string sid = notebook_http::TakeCookie(std::string(req[http::field::cookie]), kCookie, &rest);
    std::optional<HttpCaller> caller = sid.empty() ? std::nullopt : sessions_.Find(sid, NowUnix());
    if (!caller) {
      co_await Text(stream, 401, LoginPage(target.size() <= 2048 ? target : path,
                                           sid.empty() ? "Log in with your athanor token to open this notebook."
                                                       : "Your notebook session has expired: log in again."),
                    "text/html; charset=utf-8");
      co_return;
    }
    absl::StatusOr<LogTarget> where = Authorize(*caller, job_id);
    if (!where.ok()) {
      int status = absl::IsPermissionDenied(where.status()) ? 403
                   : absl::IsFailedPrecondition(where.status()) ? 409
                                                               : 404;
      co_await Text(stream, status, std::string(where.status().message()));
      co_return;
    }
    // What the notebook server gets: the head without our cookie or any
    // credential of the browser's (the agent adds the server's token).
    std::string first = notebook_http::RelayedHead(req, rest);
    first.append(static_cast<const char*>(buffer.data().data()), buffer.size());  // the body's start
    buffer.consume(buffer.size());
    beast::get_lowest_layer(stream).expires_never();
    co_await Relay(c, stream, job_id, *where, std::move(first));
  }

  // Checks `caller` may open `job_id`'s notebook; where its rank 0 runs.
  absl::StatusOr<LogTarget> Authorize(const HttpCaller& caller, const std::string& job_id) {
    if (job_id.empty() || job_id.size() > notebook_http::kMaxJobIdBytes) {
      return absl::NotFoundError("no such notebook: give /notebook/<job>/");
    }
    CoreReads reads(options_.core);
    absl::StatusOr<JobRecord> job = reads.GetJob(job_id);
    if (!job.ok()) return absl::NotFoundError(absl::StrCat("job ", job_id, ": no such job"));
    bool admin = caller.role == "admin";
    if (!admin && job->spec.tenant != caller.tenant) {
      return absl::PermissionDeniedError(
          absl::StrCat("job ", job_id, " is not tenant '", caller.tenant, "''s: its notebook is not yours to open"));
    }
    if (!job->spec.notebook) return absl::NotFoundError(absl::StrCat("job ", job_id, " runs no notebook"));
    if (job->state != JobState::kRunning) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is ", JobStateName(job->state),
                                                        ", not running: its notebook is not open"));
    }
    absl::StatusOr<std::vector<LogTarget>> targets = reads.LogTargets(job_id, 0, 0);
    if (!targets.ok() || targets->empty() || targets->front().agent_address.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, ": its rank 0's node is not known"));
    }
    return targets->front();
  }

  std::shared_ptr<rpc::AgentInteractive::Stub> Stub(const LogTarget& t) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[t.node + "@" + t.agent_address];
    if (!stub) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      std::shared_ptr<grpc::ChannelCredentials> creds =
          options_.agent_tls == nullptr
              ? grpc::InsecureChannelCredentials()
              : security::ClientCredentials(*options_.agent_tls, security::AgentName(t.node), "", &args);
      stub = rpc::AgentInteractive::NewStub(grpc::CreateCustomChannel(t.agent_address, creds, args));
    }
    return stub;
  }

  // The bytes from the agent waiting for the browser (tunnel reader -> io thread).
  struct Outbox {
    absl::Mutex mu;
    std::deque<std::string> chunks ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;
    bool done ABSL_GUARDED_BY(mu) = false;   // no more will come (or none is wanted)
    bool ended ABSL_GUARDED_BY(mu) = false;  // the agent's stream ended
    bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return bytes < kMaxQueuedBytes || done; }
  };

  awaitable<void> Relay(Conn* c, TlsStream& stream, const std::string& job_id, const LogTarget& where,
                        std::string first) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(false);
    {
      absl::MutexLock lock(&c->mu);
      if (c->stopped) co_return;
      c->ctx = &ctx;
    }
    std::unique_ptr<grpc::ClientReaderWriter<rpc::TunnelData, rpc::TunnelData>> rw = Stub(where)->Tunnel(&ctx);
    rpc::TunnelData open;
    open.mutable_open()->set_job_id(job_id);
    open.mutable_open()->set_attempt(where.attempt);
    open.mutable_open()->set_rank(where.rank);
    rpc::TunnelData head;
    head.set_data(std::move(first));
    auto outbox = std::make_shared<Outbox>();
    // Shared with the reader's posted wake-ups, which may run after Relay ends.
    auto wake = std::make_shared<asio::steady_timer>(c->io, asio::steady_timer::time_point::max());
    bool sent = false;  // a byte of the notebook's answer reached the browser
    if (rw->Write(open) && rw->Write(head)) {
      std::thread reader([&rw, outbox, wake, io = &c->io] {
        rpc::TunnelData d;
        while (rw->Read(&d)) {
          const bool eof = d.eof();
          if (!d.data().empty()) {
            absl::MutexLock lock(&outbox->mu);
            outbox->mu.Await(absl::Condition(outbox.get(), &Outbox::HasRoom));
            outbox->bytes += d.data().size();
            outbox->chunks.push_back(std::move(*d.mutable_data()));
          }
          asio::post(*io, [wake] { wake->cancel(); });
          if (eof) break;
        }
        absl::MutexLock lock(&outbox->mu);
        outbox->done = true;
        outbox->ended = true;
        asio::post(*io, [wake] { wake->cancel(); });
      });
      bool writes_done = false;
      bool client_done = false;
      // Set before the browser's reads are cancelled: a coroutine that has
      // not started its first read yet (the agent answered at once) must not
      // start one, which nothing would cancel.
      bool relay_over = false;
      asio::steady_timer client_wait(c->io, asio::steady_timer::time_point::max());
      // Browser -> agent, on its own coroutine; ends at the browser's close.
      asio::co_spawn(
          c->io,
          [&]() -> awaitable<void> {
            std::string buf(kMaxChunk, '\0');
            while (!relay_over) {
              boost::system::error_code ec;
              size_t n = co_await stream.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
              if (n > 0) {
                rpc::TunnelData d;
                d.set_data(buf.data(), n);
                if (!rw->Write(d)) break;
              }
              if (ec) break;
            }
            if (!writes_done) {
              writes_done = true;
              rw->WritesDone();
            }
            // Browsers do not half-close: the browser is gone, and what the
            // notebook still sends has nowhere to go.
            bool ended = false;
            {
              absl::MutexLock lock(&outbox->mu);
              ended = outbox->ended;
            }
            if (!ended) ctx.TryCancel();  // an ended call keeps the agent's status
            client_done = true;
            client_wait.cancel();
          },
          asio::detached);
      // Agent -> browser, until the notebook server closes.
      for (;;) {
        std::string chunk;
        bool done = false;
        {
          absl::MutexLock lock(&outbox->mu);
          if (!outbox->chunks.empty()) {
            chunk = std::move(outbox->chunks.front());
            outbox->chunks.pop_front();
            outbox->bytes -= chunk.size();
          } else {
            done = outbox->done;
          }
        }
        if (!chunk.empty()) {
          boost::system::error_code ec;
          co_await asio::async_write(stream, asio::buffer(chunk), asio::redirect_error(use_awaitable, ec));
          if (ec) break;
          sent = true;
          continue;
        }
        if (done) break;
        boost::system::error_code ec;
        wake->expires_at(asio::steady_timer::time_point::max());
        co_await wake->async_wait(asio::redirect_error(use_awaitable, ec));
      }
      if (!writes_done) {
        writes_done = true;
        rw->WritesDone();
      }
      // The browser's side stops too; its coroutine uses this frame's locals.
      boost::system::error_code cancel_ec;
      relay_over = true;
      beast::get_lowest_layer(stream).socket().cancel(cancel_ec);
      while (!client_done) {
        boost::system::error_code ec;
        client_wait.expires_at(asio::steady_timer::time_point::max());
        co_await client_wait.async_wait(asio::redirect_error(use_awaitable, ec));
      }
      bool ended = false;
      {
        absl::MutexLock lock(&outbox->mu);
        ended = outbox->ended;
        outbox->done = true;
      }
      if (!ended) ctx.TryCancel();  // the agent's side ends with ours
      reader.join();
    }
    grpc::Status s = rw->Finish();
    {
      absl::MutexLock lock(&c->mu);
      c->ctx = nullptr;
    }
    if (!sent) {  // nothing answered: say why (the server may still be starting)
      std::string why = s.ok() ? "the notebook server closed the connection without answering"
                               : absl::StrCat("job ", job_id, ": ", s.error_message().substr(0, 1024));
      http::response<http::string_body> res{s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                                                    s.error_code() == grpc::StatusCode::FAILED_PRECONDITION
                                                ? http::status::service_unavailable
                                                : http::status::bad_gateway,
                                            11};
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.set(http::field::retry_after, "1");
      res.body() = why + "\n";
      co_await Reply(stream, res);
      co_return;
    }
    if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
      ATHANOR_LOG(INFO) << "notebook proxy: job " << job_id << ": tunnel: " << s.error_message();
    }
    boost::system::error_code ec;
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
    co_await stream.async_shutdown(asio::redirect_error(use_awaitable, ec));
    beast::get_lowest_layer(stream).close();
  }

  awaitable<void> Login(TlsStream& stream, beast::flat_buffer& buffer, http::request_parser<http::empty_body>& head) {
    std::string target(head.get().target());
    if (head.get().method() == http::verb::get) {
      co_await Text(stream, 200, LoginPage(notebook_http::LoginNext(target), "Log in with your athanor token."), "text/html; charset=utf-8");
      co_return;
    }
    if (head.get().method() != http::verb::post) {
      co_await Text(stream, 405, "/notebook-login takes GET (the form) or POST (the token)");
      co_return;
    }
    // The header was read with the proxy's general parser: the login's own
    // cap is checked here, on the declared length, before any body is read.
    boost::optional<uint64_t> length = head.content_length();
    if (head.chunked() || (length && *length > kMaxLoginBodyBytes)) {
      co_await Text(stream, 413, absl::StrCat("login: a body of at most ", kMaxLoginBodyBytes,
                                              " bytes, with a Content-Length"));
      co_return;
    }
    http::request_parser<http::string_body> parser(std::move(head));
    parser.body_limit(kMaxLoginBodyBytes);
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      co_await Text(stream, 400, absl::StrCat("login: bad body (at most ", kMaxLoginBodyBytes, " bytes): ", ec.message()));
      co_return;
    }
    const http::request<http::string_body>& req = parser.get();
    std::map<std::string, std::string> form = ParseForm(req.body());
    HttpRequest auth;
    auth.method = "POST";
    auth.path = "/notebook-login";
    auth.authorization = std::string(req[http::field::authorization]);
    if (auth.authorization.empty() && !form["token"].empty()) auth.authorization = "Bearer " + form["token"];
    if (auth.authorization.empty()) {
      co_await Text(stream, 401, "login: send your token as 'Authorization: Bearer <token>' or the form's token field");
      co_return;
    }
    absl::StatusOr<HttpCaller> caller = options_.authenticator(auth);
    if (!caller.ok()) {
      co_await Text(stream, 401, absl::StrCat("login refused: ", caller.status().message()));
      co_return;
    }
    absl::StatusOr<std::string> sid = sessions_.Create(*caller, NowUnix());
    if (!sid.ok()) {
      co_await Text(stream, 500, std::string(sid.status().message()));
      co_return;
    }
    // Only a notebook path of this server: no open redirect.
    std::string next = notebook_http::SafeNext(form["next"]);
    http::response<http::string_body> res{next.empty() ? http::status::ok : http::status::see_other, 11};
    res.set(http::field::set_cookie,
            absl::StrCat(kCookie, "=", *sid, "; Path=/notebook/; Max-Age=", sessions_.ttl_s(),
                         "; HttpOnly; Secure; SameSite=Strict"));
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (!next.empty()) res.set(http::field::location, next);
    res.body() = absl::StrCat("logged in as tenant '", caller->tenant, "' (", caller->role, ")\n");
    ATHANOR_LOG(INFO) << "notebook proxy: login of tenant '" << caller->tenant << "' (" << caller->role << ")";
    co_await Reply(stream, res);
  }

  static int64_t NowUnix() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  const NotebookProxyOptions options_;
  NotebookSessions sessions_;
  ssl::context ssl_;
  asio::io_context accept_io_;
  tcp::acceptor acceptor_{accept_io_};
  std::thread acceptor_thread_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  absl::Mutex mu_;
  std::set<Conn*> conns_ ABSL_GUARDED_BY(mu_);  // owned by their threads
  std::map<std::string, std::shared_ptr<rpc::AgentInteractive::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<NotebookProxy>> NotebookProxy::Start(NotebookProxyOptions options) {
  if (options.core == nullptr || !options.authenticator) {
    return absl::InvalidArgumentError("notebook proxy: needs the core and an authenticator");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  return std::unique_ptr<NotebookProxy>(new NotebookProxy(std::move(impl)));
}

NotebookProxy::NotebookProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NotebookProxy::~NotebookProxy() = default;
int NotebookProxy::port() const { return impl_->port(); }

}  // namespace athanor::coord
