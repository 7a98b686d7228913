#include "worker/agent/inventory.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "worker/agent/gpu_util.h"

namespace athanor::agent {
namespace {

// "GPU 0: NVIDIA H200 (UUID: ...)" lines; returns the count and first model.
int32_t CountWithNvidiaSmi(std::string* model) {
  SubprocessOptions options;
  options.argv = {"nvidia-smi", "-L"};
  options.capture_stdout = true;
  options.stderr_path = "/dev/null";
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(options);
  if (!p.ok()) return -1;
  std::string out = (*p)->ReadAllStdout();
  if ((*p)->Wait().exit_code != 0) return -1;
  int32_t n = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "GPU ")) continue;
    if (n++ == 0) {
      size_t colon = line.find(": ");
      size_t paren = line.find(" (UUID");
      if (colon != absl::string_view::npos) {
        *model = std::string(line.substr(colon + 2, paren == absl::string_view::npos
                                                        ? absl::string_view::npos
                                                        : paren - colon - 2));
      }
    }
  }
  return n;
}

int32_t CountProcGpus() {
  std::error_code ec;
  int32_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

Inventory DetectInventory(int32_t gpus) {
  Inventory inv;
  inv.cpus = static_cast<int32_t>(std::thread::hardware_concurrency());
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) inv.memory_mb = static_cast<int64_t>(pages) * page_size / (1 << 20);
  if (gpus >= 0) {
    inv.gpus = gpus;
    inv.gpu_model = "none";
    return inv;
  }
  int32_t n = CountWithNvidiaSmi(&inv.gpu_model);
  if (n < 0) {
    n = CountProcGpus();
    inv.gpu_model = n > 0 ? "nvidia" : "none";
  }
  inv.gpus = n;
  if (n > 0) inv.gpu_memory_mb = DetectGpuMemoryMb();
  return inv;
}

}  // namespace athanor::agent
