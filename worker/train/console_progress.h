// ConsoleProgress: athanor-train's output for a person at a terminal, in place
// of the JSON step lines that scripts read when stdout is a file or a pipe.
//
// One line that rewrites itself ("\r", the text, then erase-to-end-of-line):
//   step 120/1500  loss 3.2145  41,230 tok/s  ETA 0:12
// redrawn at most every `redraw_interval` (and always for the first and last
// step of the run), then a summary of the run on Finish():
//   done: 1500 steps in 12.3 s, 97,561 tok/s; loss 5.5452 -> 2.4312
// (first and last step's loss; "500 steps (1000 -> 1500)" after a resume).
// Rates and the ETA count only the steps this process ran (not resumed ones);
// the summary's wall time runs to Finish(), its rate to the last step.
// Times come from the caller, so tests drive it with made-up time points.
//
// Threading: one thread (the training loop). `out` is not owned and must
// outlive this object.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace athanor {

class ConsoleProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // `first_step`: the step the run starts at (0, or where it resumed);
  // `total_steps`: where it ends; `tokens_per_step`: the global batch.
  ConsoleProgress(std::ostream* out, int64_t first_step, int64_t total_steps,
                  int64_t tokens_per_step, Clock::time_point start,
                  Clock::duration redraw_interval = std::chrono::milliseconds(100));

  // Step `step` (0-based) finished at `now` with mean loss `loss`.
  void StepDone(int64_t step, double loss, Clock::time_point now);
  // Ends a line that is showing (so a log line or event can follow on its own line).
  void Break();
  // Ends the progress line and writes the summary (nothing about losses when no step ran).
  void Finish(Clock::time_point now);

  // "0:07", "12:34", "1:02:03" (negative counts as 0).
  static std::string FormatDuration(double seconds);
  // "41,230": a rate rounded to a whole number with thousands separators.
  static std::string FormatRate(double per_second);

 private:
  void Draw(Clock::time_point now);

  std::ostream* const out_;
  const int64_t first_step_, total_steps_, tokens_per_step_;
  const Clock::time_point start_;
  const Clock::duration redraw_interval_;
  int64_t steps_run_ = 0;   // steps this process ran
  int64_t last_step_ = -1;  // 0-based index of the newest step
  int64_t drawn_step_ = -1;  // the step the line on screen shows
  double first_loss_ = 0.0, last_loss_ = 0.0;
  Clock::time_point last_time_;
  Clock::time_point last_draw_;
  bool showing_ = false;  // a progress line is on screen, not yet ended
};

}  // namespace athanor
