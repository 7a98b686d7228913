#include "testing/coordinator/coordinator_process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "security/cluster_ca.h"
#include "security/private_file.h"
#include "security/tls.h"
#include "proto/athanor.grpc.pb.h"

namespace athanor::bench {

CoordinatorProcess::CoordinatorProcess(CoordinatorProcessOptions options)
    : options_(std::move(options)) {}

CoordinatorProcess::~CoordinatorProcess() { Kill(); }

std::string CoordinatorProcess::address() const {
  return absl::StrCat("127.0.0.1:", options_.port);
}

absl::Status CoordinatorProcess::Start(std::chrono::milliseconds ready_timeout) {
  if (absl::Status launched = Launch(); !launched.ok()) return launched;
  return WaitReady(ready_timeout);
}

absl::Status CoordinatorProcess::Launch() {
  if (child_) return absl::FailedPreconditionError("the coordinator is already running");
  SubprocessOptions o;
  o.argv = {options_.binary, "--listen", address(), "--state", options_.state_path};
  if (options_.tls_dir.empty()) {
    o.argv.push_back("--insecure");
  } else {
    o.argv.insert(o.argv.end(), {"--tls-dir", options_.tls_dir});
  }
  o.argv.insert(o.argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  o.stdout_path = options_.log_path;
  o.stderr_path = "=stdout";
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  child_ = std::move(*p);
  pid_ = child_->pid();
  return absl::OkStatus();
}

bool CoordinatorProcess::Running() {
  if (!child_) return false;
  if (child_->Poll().has_value()) {
    child_.reset();
    pid_ = 0;
    return false;
  }
  return true;
}

absl::Status CoordinatorProcess::WaitReady(std::chrono::milliseconds timeout, bool kill_on_timeout) {
  if (!child_) return absl::FailedPreconditionError("the coordinator is not running");
  // Ready once it answers. A fresh channel each time: the first attempts are
  // refused, and wait_for_ready makes each one last until the port opens or
  // its short deadline passes, so this loop does not spin.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentials(&args);
  std::unique_ptr<rpc::Coordinator::Stub> stub =
      rpc::Coordinator::NewStub(grpc::CreateCustomChannel(address(), creds, args));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<ExitInfo> e = child_->Poll()) {
      child_.reset();
      pid_ = 0;
      return absl::UnavailableError(absl::StrCat("athanor-coordinator exited (", e->ToString(),
                                                 "):\n", LogTail()));
    }
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
    rpc::ListNodesResponse resp;
    if (stub->ListNodes(&ctx, rpc::ListNodesRequest(), &resp).ok()) return absl::OkStatus();
  }
  if (kill_on_timeout) Kill();
  return absl::UnavailableError(absl::StrCat("athanor-coordinator did not answer within ",
                                             timeout.count(), " ms:\n", LogTail()));
}

std::shared_ptr<grpc::ChannelCredentials> CoordinatorProcess::ChannelCredentials(
    grpc::ChannelArguments* args) const {
  return BenchCredentials(options_.tls_dir, args);
}

std::shared_ptr<grpc::ChannelCredentials> BenchCredentials(const std::string& tls_dir,
                                                           grpc::ChannelArguments* args) {
  if (tls_dir.empty()) return grpc::InsecureChannelCredentials();
  absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(tls_dir, "");
  absl::StatusOr<std::string> token = security::ReadPrivateFile(tls_dir + "/admin.token");
  if (!m.ok() || !token.ok()) return grpc::InsecureChannelCredentials();  // the calls then fail, saying so
  return security::ClientCredentials(*m, security::kCoordinatorName,
                                     std::string(absl::StripAsciiWhitespace(*token)), args);
}

void CoordinatorProcess::End(int sig) {
  if (!child_) return;
  // Ignoring the error is right: it only fails when the child already exited,
  // and Wait() reaps it either way.
  child_->Signal(sig).IgnoreError();
  child_->Wait();
  child_.reset();
  pid_ = 0;
}

void CoordinatorProcess::Kill() { End(SIGKILL); }
void CoordinatorProcess::Stop() { End(SIGTERM); }

std::string CoordinatorProcess::LogTail(size_t max_bytes) const {
  std::ifstream in(options_.log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string log = ss.str();
  return log.size() > max_bytes ? log.substr(log.size() - max_bytes) : log;
}

std::string DefaultCoordinatorBinary() {
  if (const char* dir = getenv("ATHANOR_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return absl::StrCat(dir, "/athanor-coordinator");
  }
  // Binaries sit in build/bin, test binaries in build/tests.
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "athanor-coordinator";
  for (const std::filesystem::path& dir : {self.parent_path(), self.parent_path() / "../bin"}) {
    std::filesystem::path candidate = dir / "athanor-coordinator";
    if (std::filesystem::exists(candidate, ec)) return candidate.lexically_normal().string();
  }
  return "athanor-coordinator";
}

absl::StatusOr<CoordinatorProcessOptions> ScratchCoordinatorOptions(const std::string& prefix,
                                                                    std::string* dir) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, ".XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", strerror(errno)));
  }
  *dir = tmpl;
  absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) return port.status();
  CoordinatorProcessOptions o;
  o.binary = DefaultCoordinatorBinary();
  o.state_path = *dir + "/state.db";
  o.log_path = *dir + "/coordinator.log";
  o.port = *port;
  o.tls_dir = *dir + "/tls";
  if (absl::Status s = security::InitClusterCa(o.tls_dir); !s.ok()) return s;
  return o;
}

}  // namespace athanor::bench
