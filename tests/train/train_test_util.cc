#include "tests/train/train_test_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace athanor::train_test {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> JsonLines(const std::string& out, const std::string& event) {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "[")) {
      size_t close = line.find("] ");
      if (close != absl::string_view::npos) line.remove_prefix(close + 2);
    }
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(std::string(line), nullptr, false);
    if (j.is_discarded()) continue;
    if (event == "step") {
      if (j.contains("step") && !j.contains("event")) lines.push_back(j);
    } else if (event.empty() || (j.contains("event") && j["event"] == event)) {
      lines.push_back(j);
    }
  }
  return lines;
}

std::vector<std::string> ListFiles(const std::string& root) {
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root, ec)) {
    if (e.is_regular_file()) files.push_back(std::filesystem::relative(e.path(), root).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::set<int64_t> CommittedSteps(const std::string& root, const std::string& job) {
  std::set<int64_t> steps;
  for (const std::string& f : ListFiles(root)) {
    absl::string_view v = f;
    if (!absl::ConsumePrefix(&v, job + "/step-") || !absl::ConsumeSuffix(&v, "/COMMIT")) continue;
    steps.insert(std::stoll(std::string(v)));
  }
  return steps;
}

std::vector<std::string> Runner::Train(const std::vector<std::string>& extra) const {
  std::vector<std::string> argv = {bin_ + "/athanor-train", "--seed", "5", "--hidden", "48",
                                   "--optimizer", "sgd", "--lr", "0.05", "--bucket-mb", "0.05",
                                   "--first-bucket-mb", "0.01", "--timeout-s", "20"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<std::string> Runner::UnderRun(int n, const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {bin_ + "/athanor-run", "--nproc", std::to_string(n), "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::unique_ptr<Subprocess> Runner::Start(const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& env) {
  SubprocessOptions o;
  o.argv = argv;
  o.env = env;
  o.capture_stdout = true;
  o.stderr_path = dir_ + "/stderr." + std::to_string(runs_++);
  std::remove(o.stderr_path.c_str());
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(o);
  return p.ok() ? std::move(*p) : nullptr;
}

Output Runner::Finish(Subprocess* p) {
  Output r;
  r.out = p->ReadAllStdout();
  r.exit = p->Wait();
  r.err = ReadFile(dir_ + "/stderr." + std::to_string(runs_ - 1));
  return r;
}

Output Runner::Run(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env) {
  std::unique_ptr<Subprocess> p = Start(argv, env);
  if (p == nullptr) return Output{ExitInfo{127, 0}, "", "cannot start " + argv[0]};
  return Finish(p.get());
}

double RelativeMaxDiff(const Weights& a, const Weights& b) {
  double diff = 0, scale = 0;
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      ADD_FAILURE() << "tensor " << name << " missing";
      continue;
    }
    const std::vector<float>& vb = it->second;
    EXPECT_EQ(va.size(), vb.size()) << name;
    for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(va[i] - vb[i])));
      scale = std::max(scale, static_cast<double>(std::abs(vb[i])));
    }
  }
  return diff / scale;
}

void RunnerTest::SetUp() {
  alarm(watchdog_seconds_);
  const char* bin = std::getenv("ATHANOR_BIN_DIR");
  ASSERT_NE(bin, nullptr) << "ATHANOR_BIN_DIR not set (run through ctest)";
  dir_ = ::testing::TempDir() + "/" + name_ + "_" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str()), 0);
  runner_ = std::make_unique<Runner>(bin, dir_);
}

void RunnerTest::TearDown() {
  alarm(0);
  (void)system(("rm -rf " + dir_).c_str());
}

}  // namespace athanor::train_test
