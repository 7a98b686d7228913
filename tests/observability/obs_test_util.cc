#include "tests/observability/obs_test_util.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "security/cluster_ca.h"
#include "security/tls_client.h"

namespace athanor::testing {
namespace {

// The dashboard is served over HTTPS with the coordinator's certificate
// (named coordinator.athanor, from the cluster CA, which Chromium does not
// know): the browser trusts exactly that certificate's key, nothing else.
std::vector<std::string> Chromium(LocalCluster& cluster) {
  const std::string spki = SpkiSha256Base64(ReadFile(cluster.tls_dir() + "/coordinator.crt"));
  EXPECT_FALSE(spki.empty()) << "cannot read the coordinator's certificate";
  return {"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--user-data-dir=" + cluster.dir() + "/chromium", "--window-size=1280,1000",
          "--virtual-time-budget=8000", "--ignore-certificate-errors-spki-list=" + spki};
}

}  // namespace

std::vector<std::string> OwnMasterPort() {
  const std::string port = std::to_string(PickUnusedPort());
  return {"--master-port-range", port + "-" + port};
}

std::string SubmitLongTraining(LocalCluster& cluster, const std::string& tenant, int nodes,
                               int gpus_per_node) {
  const std::string bin = std::getenv("ATHANOR_BIN_DIR");
  // About 25 ms a step here: slow enough to watch, fast enough to chart.
  CliResult r = cluster.Cli({"submit", "--tenant", tenant, "--name", "watched", "--nodes", std::to_string(nodes),
                             "--gpus-per-node", std::to_string(gpus_per_node), "--env", "OPENBLAS_NUM_THREADS=1",
                             "--", bin + "/athanor-train", "--hidden", "512", "--layers", "2", "--micro-batch",
                             "32", "--steps", "1000000", "--timeout-s", "30"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(0, r.out.find('\n'));
}

CliResult RunTool(const std::vector<std::string>& argv, const std::string& err_path) {
  CliResult r;
  SubprocessOptions o;
  o.argv = argv;
  o.capture_stdout = true;
  std::filesystem::remove(err_path);
  o.stderr_path = err_path;
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    r.err = std::string(p.status().message());
    return r;
  }
  r.out = (*p)->ReadAllStdout();
  r.exit_code = (*p)->Wait().exit_code;
  r.err = ReadFile(err_path);
  return r;
}

nlohmann::json GetJson(LocalCluster& cluster, const std::string& path) {
  HttpResult r = cluster.HttpGet(cluster.http_address(), path);
  if (r.status != 200) return nullptr;
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_discarded() ? nullptr : j;
}

HttpResult HttpGetAs(LocalCluster& cluster, const std::string& token, const std::string& path) {
  HttpResult result;
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", cluster.http_address(),
                                       "\r\nConnection: close\r\nAuthorization: Bearer ", token, "\r\n\r\n");
  absl::StatusOr<std::string> raw = security::TlsExchange(
      cluster.http_address(), ReadFile(cluster.tls_dir() + "/ca.crt"), security::kCoordinatorName, req);
  if (!raw.ok()) return result;
  const size_t head_end = raw->find("\r\n\r\n");
  if (raw->rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return result;
  if (!absl::SimpleAtoi(raw->substr(9, 3), &result.status)) result.status = 0;
  result.body = raw->substr(head_end + 4);
  return result;
}

std::string DumpDom(LocalCluster& cluster, const std::string& url) {
  std::vector<std::string> argv = Chromium(cluster);
  argv.push_back("--dump-dom");
  argv.push_back(url);
  CliResult r = RunTool(argv, cluster.dir() + "/chromium.err");
  EXPECT_EQ(r.exit_code, 0) << "chromium (Debian package) is required: " << r.err;
  return r.out;
}

uintmax_t Screenshot(LocalCluster& cluster, const std::string& url, const std::string& path) {
  std::filesystem::remove(path);
  std::vector<std::string> argv = Chromium(cluster);
  argv.push_back("--screenshot=" + path);
  argv.push_back(url);
  CliResult r = RunTool(argv, cluster.dir() + "/chromium-shot.err");
  EXPECT_EQ(r.exit_code, 0) << "chromium (Debian package) is required: " << r.err;
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

std::map<int64_t, double> StepLosses(LocalCluster& cluster, const std::string& job) {
  std::map<int64_t, double> out;
  CliResult logs = cluster.Cli({"logs", job, "--rank", "0"});
  for (absl::string_view line : absl::StrSplit(logs.out, '\n')) {
    size_t brace = line.find('{');
    if (brace == absl::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line.substr(brace), nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("loss")) continue;
    out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

std::string ArtifactDir() {
  const char* env = std::getenv("ATHANOR_ARTIFACT_DIR");
  std::string dir = env != nullptr && *env != '\0'
                        ? std::string(env)
                        : std::string(std::getenv("ATHANOR_BIN_DIR")) + "/../tests/artifacts/observability";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string SpkiSha256Base64(const std::string& cert_pem) {
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return "";
  unsigned char* der = nullptr;
  int len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
  X509_free(cert);
  if (len <= 0) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_Digest(der, static_cast<size_t>(len), digest, &digest_len, EVP_sha256(), nullptr);
  OPENSSL_free(der);
  unsigned char b64[2 * EVP_MAX_MD_SIZE];
  int n = EVP_EncodeBlock(b64, digest, static_cast<int>(digest_len));
  return std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n));
}

}  // namespace athanor::testing
