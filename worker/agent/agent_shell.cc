// AgentInteractive.Shell: a shell in a running rank's sandbox
// (shell_session.h). The handler thread sends the command's output; a second
// thread reads the coordinator's input. When the input stream ends before the
// command has (the client went away), the command is hung up.
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/escape.h"
#include "common/logging.h"
#include "security/tls.h"
#include "worker/agent/agent_interactive_service.h"
#include "worker/agent/shell_session.h"

namespace athanor::agent {
namespace {

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxCommandArgs = 1024;
constexpr size_t kMaxCommandBytes = 64 << 10;
constexpr int kMaxWindow = 10000;

grpc::Status Invalid(const std::string& what) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what); }

// The shell's options from `open`, every field checked.
grpc::Status ParseOpen(const rpc::ShellOpen& open, ShellOptions* out) {
  if (open.job_id().empty() || open.job_id().size() > kMaxIdBytes) return Invalid("job_id: empty or too long");
  if (open.rank() < 0 || open.attempt() <= 0) return Invalid("rank/attempt: out of range");
  if (open.tenant().size() > kMaxIdBytes) return Invalid("tenant: too long");
  if (static_cast<size_t>(open.command_size()) > kMaxCommandArgs) return Invalid("command: too many arguments");
  size_t bytes = 0;
  for (const std::string& arg : open.command()) {
    if (arg.find('\0') != std::string::npos) return Invalid("command: an argument holds a NUL");
    bytes += arg.size() + 1;
  }
  if (bytes > kMaxCommandBytes) return Invalid("command: over 64 KiB");
  if (open.term().size() > 64) return Invalid("term: over 64 bytes");
  for (char c : open.term()) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '+') {
      return Invalid("term: only letters, digits and -_.+");
    }
  }
  if (open.has_size() && (open.size().rows() < 0 || open.size().rows() > kMaxWindow || open.size().cols() < 0 ||
                          open.size().cols() > kMaxWindow)) {
    return Invalid("size: rows and cols are 0..10000");
  }
  out->key = RankKey{open.job_id(), open.attempt(), open.rank()};
  out->tenant = open.tenant();
  out->command.assign(open.command().begin(), open.command().end());
  if (out->command.empty()) out->command = {"/bin/sh"};
  out->term = open.term().empty() ? "xterm" : open.term();
  out->tty = open.tty();
  if (open.has_size() && open.size().rows() > 0 && open.size().cols() > 0) {
    out->rows = open.size().rows();
    out->cols = open.size().cols();
  }
  return grpc::Status::OK;
}

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

grpc::Status AgentInteractiveService::Shell(grpc::ServerContext* ctx,
                                            grpc::ServerReaderWriter<rpc::ShellOutput, rpc::ShellInput>* stream) {
  if (coordinator_only_ &&
      (ctx->auth_context() == nullptr || !security::PeerIsCoordinator(*ctx->auth_context()))) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "Shell is for the coordinator only (its certificate)");
  }
  RankSupervisor* ranks = supervisor();
  if (ranks == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the agent is starting");
  rpc::ShellInput first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no open message");
  if (!first.has_open()) return Invalid("the first message holds `open`");
  ShellOptions options;
  if (grpc::Status s = ParseOpen(first.open(), &options); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<ShellSession>> session = ShellSession::Start(ranks, options);
  if (!session.ok()) {
    ATHANOR_LOG(WARNING) << "shell on job " << options.key.job_id << " rank " << options.key.rank
                         << " refused: " << EscapeControls(session.status().message());
    return ToGrpc(session.status());
  }
  ShellSession* shell = session->get();
  shell->SetGone([ctx] { return ctx->IsCancelled(); });
  ATHANOR_LOG(INFO) << "shell opened on job " << options.key.job_id << " attempt " << options.key.attempt
                    << " rank " << options.key.rank << (options.tty ? " (tty)" : " (pipes)");
  shells_.Add(options.key, shell);
  // An empty first output says the command has started (the coordinator
  // answers the client's open with the agent's error otherwise).
  bool client_there = stream->Write(rpc::ShellOutput());

  absl::Notification input_done;
  std::thread input([&] {
    rpc::ShellInput in;
    bool writable = true;
    while (stream->Read(&in)) {
      if (in.data().size() > ShellSession::kMaxChunk) break;  // a misbehaving client: hang up
      if (!in.data().empty() && writable) writable = shell->Write(in.data()).ok();
      if (in.has_resize() && in.resize().rows() > 0 && in.resize().rows() <= kMaxWindow &&
          in.resize().cols() > 0 && in.resize().cols() <= kMaxWindow) {
        shell->Resize(in.resize().rows(), in.resize().cols());
      }
      if (in.eof() && writable) {
        shell->CloseInput();
        writable = !options.tty ? false : writable;
      }
    }
    shell->Hangup();  // a no-op effect once the command has ended and been reaped
    input_done.Notify();
  });
  for (;;) {
    ShellSession::Event e = shell->Next();
    rpc::ShellOutput out;
    out.set_data(std::move(e.data));
    if (!e.notice.empty()) out.set_notice(e.notice.substr(0, 4096));
    if (e.exited) {
      out.set_exited(true);
      out.set_exit_code(e.exit_code);
    }
    if (client_there) client_there = stream->Write(out);
    if (e.exited) break;
  }
  shells_.Remove(options.key, shell);
  // The client closes its side once it has the exit; one that does not is cut off.
  if (!input_done.WaitForNotificationWithTimeout(absl::Seconds(5))) ctx->TryCancel();
  input.join();
  session->reset();
  ATHANOR_LOG(INFO) << "shell closed on job " << options.key.job_id << " rank " << options.key.rank;
  return grpc::Status::OK;
}

}  // namespace athanor::agent
