#include "testing/s3/s3rver_fixture.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace athanor::testing_s3 {

std::string MakeTempDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(base ? base : "/tmp", "/athanor-", tag, "-XXXXXX");
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<S3rverProcess>> S3rverProcess::Start(const std::string& bucket) {
  const char* src = std::getenv("ATHANOR_SOURCE_DIR");
  if (src == nullptr) return absl::NotFoundError("ATHANOR_SOURCE_DIR is not set");
  std::string script = absl::StrCat(src, "/tests/s3rver/node_modules/s3rver/bin/s3rver.js");
  if (access(script.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(script, " is missing (run scripts/install-test-tools)"));
  }
  std::unique_ptr<S3rverProcess> server(new S3rverProcess());
  server->bucket_ = bucket;
  server->dir_ = MakeTempDir("s3rver");
  SubprocessOptions options;
  // s3rver's ListObjectsV2 continuation tokens use DES, which OpenSSL 3 only
  // offers through its legacy provider. setpriv (util-linux, Essential in
  // Debian) sets PR_SET_PDEATHSIG before exec: s3rver is SIGKILLed when the
  // test dies, even by SIGKILL or a watchdog's _exit, and is not left behind
  // (the signal follows the starting thread: start it from one that outlives it).
  options.argv = {"setpriv", "--pdeathsig", "KILL", "node", "--openssl-legacy-provider", script, "-d", server->dir_, "-a", "127.0.0.1", "-p", "0", "--silent",
                  "--configure-bucket", bucket};
  options.capture_stdout = true;
  options.stderr_path = server->dir_ + ".stderr";
  auto child = Subprocess::Start(options);
  if (!child.ok()) return absl::NotFoundError(absl::StrCat("cannot start node: ", child.status().message()));
  server->child_ = std::move(*child);
  // Read stdout until the "listening" line, for at most 30 s.
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    size_t at = out.find("listening on ");
    size_t eol = at == std::string::npos ? std::string::npos : out.find('\n', at);
    if (eol != std::string::npos) {
      std::string addr = out.substr(at + 13, eol - at - 13);
      if (!absl::SimpleAtoi(addr.substr(addr.rfind(':') + 1), &server->port_)) {
        return absl::InternalError(absl::StrCat("cannot parse s3rver banner: ", out));
      }
      return server;
    }
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return absl::DeadlineExceededError(absl::StrCat("s3rver did not start: ", out));
    pollfd p{server->child_->stdout_fd(), POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char buf[512];
    ssize_t n = read(server->child_->stdout_fd(), buf, sizeof(buf));
    if (n <= 0) {
      auto err = ReadFile(server->dir_ + ".stderr");
      return absl::InternalError(absl::StrCat("s3rver exited: ", out, err.ok() ? *err : ""));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

S3rverProcess::~S3rverProcess() {
  if (child_) {
    child_->Signal(SIGKILL).IgnoreError();
    child_->Wait();
  }
  if (!dir_.empty()) {
    std::string cmd = absl::StrCat("rm -rf '", dir_, "' '", dir_, ".stderr'");
    (void)std::system(cmd.c_str());
  }
}

std::string S3rverProcess::Uri(const std::string& prefix, const std::string& extra_query) const {
  return UriVia(port_, prefix, extra_query);
}

std::string S3rverProcess::TenantUri(const std::string& prefix) const {
  return absl::StrCat("s3://", bucket_, "/", prefix, "?endpoint=http://127.0.0.1:", port_, "&region=us-east-1");
}

std::string S3rverProcess::UriVia(int port, const std::string& prefix, const std::string& extra_query) const {
  return absl::StrCat("s3://", bucket_, "/", prefix, "?endpoint=http://127.0.0.1:", port,
                      "&access_key=S3RVER&secret_key=S3RVER&region=us-east-1",
                      extra_query.empty() ? "" : "&", extra_query);
}

absl::StatusOr<std::string> RunS3cmd(int endpoint_port, const std::vector<std::string>& args) {
  std::string dir = MakeTempDir("s3cmd");
  std::string config = dir + "/s3cfg";
  RETURN_IF_ERROR(WriteFile(config, absl::StrCat("[default]\naccess_key = S3RVER\nsecret_key = S3RVER\n",
                                                 "host_base = 127.0.0.1:", endpoint_port, "\n",
                                                 "host_bucket = 127.0.0.1:", endpoint_port, "\n",
                                                 "use_https = False\nbucket_location = us-east-1\n",
                                                 "signature_v2 = False\n")));
  SubprocessOptions options;
  options.argv = {"s3cmd", "-c", config, "--no-progress"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.capture_stdout = true;
  options.stderr_path = "=stdout";
  options.env["HOME"] = dir;
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> child, Subprocess::Start(options));
  std::string out = child->ReadAllStdout();
  ExitInfo exit = child->Wait();
  (void)std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  if (exit.exit_code != 0) {
    return absl::InternalError(absl::StrCat("s3cmd exited ", exit.ToString(), ": ", out));
  }
  return out;
}

}  // namespace athanor::testing_s3
