// Fuzzes the agent's telemetry message parser (worker/agent/telemetry_hub.h):
// any bytes a rank sends must be refused with a reason or give a sample with
// a non-negative step, finite figures and no negative total.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/agent/telemetry_hub.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int32_t rank = 0;
  athanor::agent::StepSample s;
  bool skipped = false;
  std::string why;
  if (!athanor::agent::TelemetryHub::Parse(reinterpret_cast<const char*>(data), size, &rank, &s, &skipped,
                                           &why)) {
    if (why.empty()) __builtin_trap();
    return 0;
  }
  if (s.step < 0 || rank < 0 || !std::isfinite(s.loss) || !std::isfinite(s.tokens_per_s) ||
      !std::isfinite(s.comm_wait_share) || s.total_steps < 0) {
    __builtin_trap();
  }
  return 0;
}
