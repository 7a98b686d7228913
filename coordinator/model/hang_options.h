// Knobs of hang detection, auto-drain and straggler flags (hang_detector.h;
// docs/operations.md lists them with their coordinator flags). Value type.
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace athanor::coord {

struct HangOptions {
  // An attempt hangs after no progress for max(min_timeout, step_multiple x
  // its median step time), unless its job sets hang_timeout_s.
  Duration min_timeout = Seconds(30);
  double step_multiple = 10;
  // The shortest hang_timeout_s a job may ask for: a submission below it is
  // refused (a tenant's short timeout must not turn a pause of its own into
  // verdicts against a node), and an older record below it is raised to it.
  Duration timeout_floor = Seconds(30);
  // Auto-drain: a node named suspect in hangs of jobs of this many different
  // tenants within `drain_window` is drained; 0 turns it off. Hangs the job
  // itself caused (a stopped process, ranks idle outside collectives) never
  // count, and one tenant counts once however many of its jobs hang there,
  // so no tenant alone can drain a node. Never 1 (hang_flags.cc).
  int32_t drain_after = 2;
  Duration drain_window = Seconds(3600);
  // Stragglers: compute per step above straggler_ratio x the other ranks'
  // median, both over the last straggler_windows windows of straggler_window.
  double straggler_ratio = 1.3;
  int32_t straggler_windows = 3;
  Duration straggler_window = Seconds(10);
};

}  // namespace athanor::coord
