#include "coordinator/health/hang_flags.h"

#include "absl/strings/str_cat.h"

namespace athanor::coord {

namespace po = boost::program_options;

void AddHangFlags(po::options_description* desc, HangFlags* f) {
  desc->add_options()
      ("hang-timeout-min-s", po::value(&f->min_timeout_s)->default_value(30),
       "an attempt whose ranks make no progress this long (or hang-step-multiple x its median "
       "step time, if longer) hangs, unless its job sets --hang-timeout")
      ("hang-step-multiple", po::value(&f->step_multiple)->default_value(10),
       "see hang-timeout-min-s")
      ("hang-timeout-floor-s", po::value(&f->timeout_floor_s)->default_value(30),
       "the shortest --hang-timeout a job may ask for; submissions below it are refused")
      ("hang-drain-after", po::value(&f->drain_after)->default_value(2),
       "drain a node named hang suspect in hangs of jobs of this many different tenants within "
       "hang-drain-window-s (0: never; 1 is refused: one tenant alone never drains a node). "
       "Hangs a job caused itself (a stopped process, idle ranks) do not count")
      ("hang-drain-window-s", po::value(&f->drain_window_s)->default_value(3600),
       "see hang-drain-after")
      ("straggler-ratio", po::value(&f->straggler_ratio)->default_value(1.3),
       "flag a rank whose compute per step is above this x the other ranks' median...")
      ("straggler-windows", po::value(&f->straggler_windows)->default_value(3),
       "...over this many windows")
      ("straggler-window-s", po::value(&f->straggler_window_s)->default_value(10),
       "length of one straggler window");
}

absl::Status ApplyHangFlags(const HangFlags& f, HangOptions* out) {
  auto bad = [](const char* flag, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
  };
  if (!(f.min_timeout_s >= 1 && f.min_timeout_s <= 86400)) {
    return bad("hang-timeout-min-s", "must be in 1..86400");
  }
  if (!(f.step_multiple >= 1 && f.step_multiple <= 1000)) {
    return bad("hang-step-multiple", "must be in 1..1000");
  }
  if (!(f.timeout_floor_s >= 1 && f.timeout_floor_s <= 86400)) {
    return bad("hang-timeout-floor-s", "must be in 1..86400");
  }
  if (f.drain_after < 0 || f.drain_after == 1) {
    return bad("hang-drain-after",
               "must be 0 (never) or at least 2 (tenants): one tenant's hangs alone never drain a node");
  }
  if (!(f.drain_window_s > 0 && f.drain_window_s <= 30 * 86400)) {
    return bad("hang-drain-window-s", "must be in (0, 30 days]");
  }
  if (!(f.straggler_ratio > 1 && f.straggler_ratio <= 100)) {
    return bad("straggler-ratio", "must be in (1, 100]");
  }
  if (f.straggler_windows < 1) return bad("straggler-windows", "must be >= 1");
  if (!(f.straggler_window_s >= 0.1 && f.straggler_window_s <= 3600)) {
    return bad("straggler-window-s", "must be in 0.1..3600");
  }
  out->min_timeout = Seconds(f.min_timeout_s);
  out->step_multiple = f.step_multiple;
  out->timeout_floor = Seconds(f.timeout_floor_s);
  out->drain_after = f.drain_after;
  out->drain_window = Seconds(f.drain_window_s);
  out->straggler_ratio = f.straggler_ratio;
  out->straggler_windows = f.straggler_windows;
  out->straggler_window = Seconds(f.straggler_window_s);
  return absl::OkStatus();
}

}  // namespace athanor::coord
