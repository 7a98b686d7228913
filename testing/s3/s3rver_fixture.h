// Test support: a real S3-compatible server (s3rver, from
// tests/s3rver/node_modules) on loopback, and Debian's s3cmd configured to
// talk to it, for cross-checking what our client writes.
//
// S3rverProcess::Start runs `node .../s3rver.js -d TMP -a 127.0.0.1 -p 0
// --silent --configure-bucket BUCKET` in its own process group and reads the
// port it prints ("S3rver listening on 127.0.0.1:PORT") with a deadline; no
// sleeps. The destructor kills the group (SIGKILL) and reaps it; should the
// test die first (SIGKILL, a watchdog's _exit), the kernel SIGKILLs s3rver
// (PR_SET_PDEATHSIG, set by setpriv). Owned by one thread, which must outlive
// the server. Skip-worthy absence (no node, no s3rver checkout) is NotFound.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace athanor::testing_s3 {

class S3rverProcess {
 public:
  static absl::StatusOr<std::unique_ptr<S3rverProcess>> Start(const std::string& bucket);
  ~S3rverProcess();

  int port() const { return port_; }
  pid_t pid() const { return child_->pid(); }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& bucket() const { return bucket_; }
  // s3://BUCKET/PREFIX?endpoint=...&access_key=S3RVER&secret_key=S3RVER + extra.
  std::string Uri(const std::string& prefix, const std::string& extra_query = "") const;
  // The same store without keys, as a secure coordinator wants it: the
  // tenant's credentials are set by an admin (S3RVER / S3RVER here).
  std::string TenantUri(const std::string& prefix) const;
  std::string UriVia(int port, const std::string& prefix, const std::string& extra_query) const;

 private:
  S3rverProcess() = default;
  std::unique_ptr<Subprocess> child_;
  std::string dir_;
  std::string bucket_;
  int port_ = 0;
};

// Runs s3cmd against `endpoint_port` with a temporary config file (dummy
// S3RVER keys, plain HTTP, path-style). Returns its stdout; Internal with the
// output when it exits non-zero.
absl::StatusOr<std::string> RunS3cmd(int endpoint_port, const std::vector<std::string>& args);

// A fresh temporary directory.
std::string MakeTempDir(const std::string& tag);

// Whole-file helpers.
absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, const std::string& data);

}  // namespace athanor::testing_s3
