#include "worker/train/console_progress.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace athanor {
namespace {

double Seconds(ConsoleProgress::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

ConsoleProgress::ConsoleProgress(std::ostream* out, int64_t first_step, int64_t total_steps,
                                 int64_t tokens_per_step, Clock::time_point start,
                                 Clock::duration redraw_interval)
    : out_(out),
      first_step_(first_step),
      total_steps_(total_steps),
      tokens_per_step_(tokens_per_step),
      start_(start),
      redraw_interval_(redraw_interval),
      last_time_(start) {}

std::string ConsoleProgress::FormatDuration(double seconds) {
  const int64_t s = seconds > 0 ? static_cast<int64_t>(std::llround(seconds)) : 0;
  if (s < 3600) return absl::StrFormat("%d:%02d", s / 60, s % 60);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

std::string ConsoleProgress::FormatRate(double per_second) {
  const std::string digits = absl::StrCat(per_second > 0 ? std::llround(per_second) : 0);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

void ConsoleProgress::StepDone(int64_t step, double loss, Clock::time_point now) {
  if (steps_run_ == 0) first_loss_ = loss;
  ++steps_run_;
  last_step_ = step;
  last_loss_ = loss;
  last_time_ = now;
  const bool edge = steps_run_ == 1 || step + 1 >= total_steps_;
  if (edge || now - last_draw_ >= redraw_interval_) Draw(now);
}

void ConsoleProgress::Draw(Clock::time_point now) {
  const double elapsed = Seconds(now - start_);
  const double per_step = elapsed / static_cast<double>(steps_run_);
  const double tokens = static_cast<double>(steps_run_ * tokens_per_step_);
  const int64_t done = last_step_ + 1;
  *out_ << absl::StrFormat("\rstep %d/%d  loss %.4f  %s tok/s  ETA %s\033[K", done, total_steps_,
                           last_loss_, FormatRate(elapsed > 0 ? tokens / elapsed : 0),
                           FormatDuration(per_step * static_cast<double>(total_steps_ - done)))
        << std::flush;
  last_draw_ = now;
  drawn_step_ = last_step_;
  showing_ = true;
}

void ConsoleProgress::Break() {
  if (!showing_) return;
  // The newest step may not be drawn yet (throttled): show it before leaving the line.
  if (drawn_step_ != last_step_) Draw(last_time_);
  *out_ << "\n" << std::flush;
  showing_ = false;
}

void ConsoleProgress::Finish(Clock::time_point now) {
  Break();
  const double elapsed = Seconds(now - start_);
  const std::string wall =
      elapsed < 60 ? absl::StrFormat("%.1f s", elapsed) : FormatDuration(elapsed);
  if (steps_run_ == 0) {
    *out_ << absl::StrFormat("done: no steps to run (at step %d of %d)\n", first_step_,
                             total_steps_)
          << std::flush;
    return;
  }
  // The rate over the steps alone; the wall time includes the final save.
  const double train_s = Seconds(last_time_ - start_);
  const double tokens = static_cast<double>(steps_run_ * tokens_per_step_);
  const std::string steps =
      first_step_ == 0
          ? absl::StrCat(steps_run_, " steps")
          : absl::StrCat(steps_run_, " steps (", first_step_, " -> ", last_step_ + 1, ")");
  *out_ << absl::StrFormat("done: %s in %s, %s tok/s; loss %.4f -> %.4f\n", steps, wall,
                           FormatRate(train_s > 0 ? tokens / train_s : 0), first_loss_,
                           last_loss_)
        << std::flush;
}

}  // namespace athanor
