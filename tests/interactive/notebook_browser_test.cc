// Notebooks end to end (docs/operations.md, "Notebooks"), on a secure local
// cluster (tests/cluster_harness.h: a coordinator with TLS and tokens serving
// --notebook-listen, one sandboxed agent; every process under the harness's
// watchdog):
//   1. tenant a's `athanor alloc --notebook --volume data:/mnt` starts
//      Jupyter in the rank's sandbox; through the proxy (login with a's
//      token, session cookie) a kernel is started over the REST API and a cell
//      run over its WebSocket channels writes a file into the volume and prints
//      a value (notebook_drive.py; Chromium then loads the notebook's tree page
//      over the DevTools protocol with a's cookie and screenshots it);
//   2. no session is 401, a bad token cannot log in, and tenant b's session is
//      refused a's notebook (403);
//   3. another job's rank reaches neither the notebook's socket (its private
//      /tmp) nor any TCP port of it;
//   4. the dashboard's instances table links to the notebook; the file is in
//      the rank's volume copy, exactly; the agent's kernel
//      probe made the kernel the instance's last use.
// Root only (the sandbox); CI runs it as root with jupyter-notebook and
// chromium installed (scripts/install-test-tools): missing ones fail it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ArtifactDir() {
  const char* env = std::getenv("ATHANOR_ARTIFACT_DIR");
  std::string dir = env != nullptr && *env != '\0'
                        ? std::string(env)
                        : std::string(std::getenv("ATHANOR_BIN_DIR")) + "/../tests/artifacts/interactive";
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `argv`; its stdout, and its exit code in *code.
std::string RunTool(const std::vector<std::string>& argv, const std::string& err_path, int* code) {
  SubprocessOptions o;
  o.argv = argv;
  o.capture_stdout = true;
  o.stderr_path = err_path;
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    *code = -1;
    return std::string(p.status().message());
  }
  std::string out = (*p)->ReadAllStdout();
  *code = (*p)->Wait().exit_code;
  return out;
}

class NotebookBrowserTest : public ::testing::Test {
 protected:
  NotebookBrowserTest()
      : port_(PickUnusedPort()),
        // Only the kernel counts as use here: the notebook server's own CPU
        // (Chromium loading its pages) would otherwise be the last signal.
        cluster_({"--notebook-listen", "127.0.0.1:" + std::to_string(port_), "--idle-cpu-fraction", "1000",
                  "--idle-net-bytes-per-s", "1000000000000", "--idle-disk-bytes-per-s", "1000000000000"}) {}
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "notebooks run in the sandbox, which needs root; CI runs this as root";
    cluster_.EnableHttp();
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-1", 2, "127.0.0.1");
    ASSERT_TRUE(cluster_.WaitForNodesUp(1)) << cluster_.CoordinatorLog();
    a_ = cluster_.CreateToken("tenant-a");
    b_ = cluster_.CreateToken("tenant-b");
  }

  const int port_;
  LocalCluster cluster_;
  std::string a_, b_;
};

TEST_F(NotebookBrowserTest, TenantRunsACellThroughTheProxyOthersCannotReachIt) {
  ASSERT_EQ(access("/usr/bin/jupyter-notebook", X_OK), 0) << "jupyter-notebook (Debian package) is required";
  CliResult made = cluster_.CliAs(a_, {"volume", "create", "data", "--size", "16M"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  CliResult refused = cluster_.CliAs(a_, {"alloc", "--notebook", "--idle-timeout", "10m", "--", "sh"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err, "athanor alloc: --notebook runs the coordinator's notebook command; give no CMD\n");
  CliResult alloc = cluster_.CliAs(a_, {"alloc", "--notebook", "--idle-timeout", "10m", "--volume", "data:/mnt"});
  ASSERT_EQ(alloc.exit_code, 0) << alloc.out << alloc.err << cluster_.CoordinatorLog();
  const std::string job = alloc.out.substr(0, alloc.out.find('\n'));
  EXPECT_NE(alloc.err.find("/notebook/" + job + "/"), std::string::npos) << alloc.err;
  rpc::Job j = cluster_.GetJob(job);
  EXPECT_TRUE(j.spec().notebook());
  ASSERT_GE(j.spec().command_size(), 4);
  EXPECT_EQ(j.spec().command(0), "jupyter");
  EXPECT_EQ(j.spec().command(3), "--sock=/tmp/athanor-nb-" + job + ".sock");
  for (const std::string& arg : j.spec().command()) EXPECT_EQ(arg.find("token"), std::string::npos) << arg;

  // 1, 2: through the proxy, as a browser.
  const std::string shot = ArtifactDir() + "/notebook_tree.png";
  std::filesystem::remove(shot);
  int code = 0;
  std::string out = RunTool({"/usr/bin/python3", std::string(std::getenv("ATHANOR_SOURCE_DIR")) +
                                                 "/tests/interactive/notebook_drive.py",
                         "--port", std::to_string(port_), "--ca", cluster_.tls_dir() + "/ca.crt", "--job", job,
                         "--token", a_, "--other-token", b_, "--code",
                         "open('/mnt/from_notebook.txt', 'w').write('written by a notebook\\n'); print(6 * 7)",
                         "--screenshot", shot, "--chromium-dir", cluster_.dir() + "/chromium"},
                        cluster_.dir() + "/drive.err", &code);
  ASSERT_EQ(code, 0) << out << ReadAll(cluster_.dir() + "/drive.err") << cluster_.CoordinatorLog();
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(r.is_discarded()) << out;
  EXPECT_EQ(r["anonymous_status"], 401);
  EXPECT_EQ(r["bad_login_status"], 401);
  EXPECT_EQ(r["other_login_status"], 200);
  EXPECT_EQ(r["other_status"], 403);
  EXPECT_EQ(r["other_body"], "job " + job + " is not tenant 'tenant-b''s: its notebook is not yours to open");
  EXPECT_EQ(r["login_status"], 200);
  EXPECT_EQ(r["cookie_attributes"],
            nlohmann::json({"HttpOnly", "Max-Age=43200", "Path=/notebook/", "SameSite=Strict", "Secure"}));
  EXPECT_EQ(r["kernel_status"], 201);
  EXPECT_EQ(r["cell_status"], "ok");
  EXPECT_EQ(r["cell_stdout"], "42\n");
  EXPECT_EQ(r["page_title"], "Home Page - Select or create a notebook");
  EXPECT_GT(std::filesystem::file_size(shot), 10000u) << "the screenshot is nearly empty";
  std::cout << "notebook reachable " << r["reachable_after_s"] << " s after the first try; screenshot " << shot
            << "\n";

  // The agent's kernel probe (every 5 s) saw the cell: the instance's last use is the kernel's.
  ASSERT_TRUE(LocalCluster::WaitFor([&] { return cluster_.GetJob(job).last_activity().signal() == "kernel"; }))
      << cluster_.GetJob(job).DebugString();

  // The dashboard's instances table links to the notebook (Chromium runs its script).
  const std::vector<std::string> chromium = {
      "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      "--user-data-dir=" + cluster_.dir() + "/chromium-dash", "--window-size=1280,1000", "--virtual-time-budget=8000",
      "--ignore-certificate-errors"};
  const std::string dash = cluster_.http_base() + "/#token=" + a_;
  std::vector<std::string> dump = chromium;
  dump.insert(dump.end(), {"--dump-dom", dash});
  std::string dom = RunTool(dump, cluster_.dir() + "/dash.err", &code);
  ASSERT_EQ(code, 0) << ReadAll(cluster_.dir() + "/dash.err");
  EXPECT_NE(dom.find("data-instance=\"" + job + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("/notebook-login?next=%2Fnotebook%2F" + job + "%2F"), std::string::npos) << dom;
  std::vector<std::string> snap = chromium;
  snap.insert(snap.end(), {"--screenshot=" + ArtifactDir() + "/dashboard_instances.png", dash});
  RunTool(snap, cluster_.dir() + "/dash-shot.err", &code);
  EXPECT_EQ(code, 0) << ReadAll(cluster_.dir() + "/dash-shot.err");

  // 3. Another job's rank: no socket to see, no TCP port to reach.
  LocalCluster::RearmWatchdog();
  const std::string probe = std::string("import socket\n") +
                            "s = socket.socket(socket.AF_UNIX)\n"
                            "try:\n  s.connect('/tmp/athanor-nb-" + job + ".sock'); print('unix: connected')\n"
                            "except OSError as e: print('unix:', type(e).__name__)\n"
                            "for port in (8888, 8889):\n"
                            "  try:\n    socket.create_connection(('127.0.0.1', port), 2); print(port, 'connected')\n"
                            "  except OSError as e: print(port, type(e).__name__)\n";
  CliResult other = cluster_.CliAs(a_, {"submit", "--nodes", "1", "--gpus-per-node", "1", "--", "/usr/bin/python3",
                                        "-c", probe});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const std::string other_id = other.out.substr(0, other.out.find('\n'));
  CliResult waited = cluster_.CliAs(a_, {"wait", other_id, "--timeout", "60"});
  ASSERT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  CliResult logs = cluster_.CliAs(a_, {"logs", other_id});
  EXPECT_EQ(logs.out,
            "[rank 0] unix: FileNotFoundError\n[rank 0] 8888 ConnectionRefusedError\n"
            "[rank 0] 8889 ConnectionRefusedError\n");

  // 4. The cell's file, in the job's volume copy on the node.
  EXPECT_EQ(ReadAll(cluster_.dir() + "/node-1/jobs/" + job + "/attempt-1/volumes/data/from_notebook.txt"),
            "written by a notebook\n");
  ASSERT_EQ(cluster_.CliAs(a_, {"cancel", job}).exit_code, 0);
}

}  // namespace
}  // namespace athanor::testing
