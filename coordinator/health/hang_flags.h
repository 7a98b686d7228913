// The coordinator's command-line flags for hang detection, auto-drain and
// straggler flags (hang_options.h). Used by main.cc only.
#pragma once

#include <boost/program_options.hpp>

#include "absl/status/status.h"
#include "coordinator/model/hang_options.h"

namespace athanor::coord {

struct HangFlags {
  double min_timeout_s = 30;
  double timeout_floor_s = 30;
  double step_multiple = 10;
  int32_t drain_after = 2;
  double drain_window_s = 3600;
  double straggler_ratio = 1.3;
  int32_t straggler_windows = 3;
  double straggler_window_s = 10;
};

void AddHangFlags(boost::program_options::options_description* desc, HangFlags* flags);
// InvalidArgument naming the flag that is out of range.
absl::Status ApplyHangFlags(const HangFlags& flags, HangOptions* out);

}  // namespace athanor::coord
