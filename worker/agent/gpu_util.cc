#include "worker/agent/gpu_util.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"

namespace athanor::agent {
namespace {

SubprocessOptions Query(const std::string& field) {
  SubprocessOptions o;
  o.argv = {"nvidia-smi", "--query-gpu=index," + field, "--format=csv,noheader,nounits"};
  o.capture_stdout = true;
  o.stderr_path = "/dev/null";
  return o;
}

}  // namespace

std::map<int, double> ParseIndexedCsv(const std::string& csv) {
  std::map<int, double> out;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    int index = 0;
    double value = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(f[0]), &index) ||
        !absl::SimpleAtod(absl::StripAsciiWhitespace(f[1]), &value)) {
      continue;
    }
    out[index] = value;
  }
  return out;
}

std::optional<std::map<int, double>> SampleGpuUtilization(RankSupervisor* supervisor) {
  return SampleGpuField(supervisor, "utilization.gpu");
}

std::optional<std::map<int, double>> SampleGpuField(RankSupervisor* supervisor, const std::string& field) {
  absl::StatusOr<std::unique_ptr<Subprocess>> p = supervisor->StartForeign(Query(field));
  if (!p.ok()) return std::nullopt;
  std::string out = (*p)->ReadAllStdout();
  ExitInfo e = (*p)->Wait();
  supervisor->EndForeign((*p)->pid());
  if (e.exit_code != 0 || e.signal != 0) return std::nullopt;
  std::map<int, double> util = ParseIndexedCsv(out);
  if (util.empty()) return std::nullopt;
  return util;
}

int64_t DetectGpuMemoryMb() {
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(Query("memory.total"));
  if (!p.ok()) return 0;
  std::string out = (*p)->ReadAllStdout();
  if ((*p)->Wait().exit_code != 0) return 0;
  std::map<int, double> mem = ParseIndexedCsv(out);
  return mem.empty() ? 0 : static_cast<int64_t>(mem.begin()->second);
}

}  // namespace athanor::agent
