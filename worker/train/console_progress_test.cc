#include "worker/train/console_progress.h"

#include <sstream>

#include "gtest/gtest.h"

namespace athanor {
namespace {

using Clock = ConsoleProgress::Clock;
using std::chrono::milliseconds;

TEST(ConsoleProgressTest, FormatsDurationsAndRates) {
  EXPECT_EQ(ConsoleProgress::FormatDuration(-3), "0:00");
  EXPECT_EQ(ConsoleProgress::FormatDuration(7.4), "0:07");
  EXPECT_EQ(ConsoleProgress::FormatDuration(754), "12:34");
  EXPECT_EQ(ConsoleProgress::FormatDuration(3723), "1:02:03");
  EXPECT_EQ(ConsoleProgress::FormatRate(0), "0");
  EXPECT_EQ(ConsoleProgress::FormatRate(999.4), "999");
  EXPECT_EQ(ConsoleProgress::FormatRate(41230), "41,230");
  EXPECT_EQ(ConsoleProgress::FormatRate(1234567.5), "1,234,568");
}

TEST(ConsoleProgressTest, RewritesOneLineAtMostEveryIntervalThenSummarises) {
  std::ostringstream out;
  const Clock::time_point t0{};
  // 4 steps of 8 tokens, 10 ms each, redrawn at most every 15 ms.
  ConsoleProgress p(&out, 0, 4, 8, t0, milliseconds(15));
  p.StepDone(0, 5.5, t0 + milliseconds(10));  // the first step is always drawn
  p.StepDone(1, 4.0, t0 + milliseconds(20));  // 10 ms after the last draw: not drawn
  p.StepDone(2, 3.0, t0 + milliseconds(30));  // 20 ms: drawn
  p.StepDone(3, 2.5, t0 + milliseconds(40));  // the last step is always drawn
  p.Finish(t0 + milliseconds(80));
  EXPECT_EQ(out.str(),
            "\rstep 1/4  loss 5.5000  800 tok/s  ETA 0:00\033[K"
            "\rstep 3/4  loss 3.0000  800 tok/s  ETA 0:00\033[K"
            "\rstep 4/4  loss 2.5000  800 tok/s  ETA 0:00\033[K\n"
            "done: 4 steps in 0.1 s, 800 tok/s; loss 5.5000 -> 2.5000\n");
}

TEST(ConsoleProgressTest, EtaAndRatesCountOnlyTheStepsThisRunRan) {
  std::ostringstream out;
  const Clock::time_point t0{};
  // Resumed at step 1000 of 2000; 2 steps of 64 tokens took 1 s: 0.5 s a step.
  ConsoleProgress p(&out, 1000, 2000, 64, t0, milliseconds(0));
  p.StepDone(1000, 2.0, t0 + milliseconds(500));
  p.StepDone(1001, 1.5, t0 + milliseconds(1000));
  p.Break();
  p.Break();  // nothing showing: a no-op
  EXPECT_EQ(out.str(),
            "\rstep 1001/2000  loss 2.0000  128 tok/s  ETA 8:20\033[K"
            "\rstep 1002/2000  loss 1.5000  128 tok/s  ETA 8:19\033[K\n");
  out.str("");
  p.Finish(t0 + std::chrono::seconds(100));
  EXPECT_EQ(out.str(), "done: 2 steps (1000 -> 1002) in 1:40, 128 tok/s; loss 2.0000 -> 1.5000\n");
}

TEST(ConsoleProgressTest, BreakShowsAStepTheThrottleHeldBack) {
  std::ostringstream out;
  const Clock::time_point t0{};
  ConsoleProgress p(&out, 0, 10, 4, t0, std::chrono::seconds(1));
  p.StepDone(0, 3.0, t0 + milliseconds(100));
  p.StepDone(1, 2.0, t0 + milliseconds(200));  // held back by the 1 s interval
  p.Break();
  EXPECT_EQ(out.str(),
            "\rstep 1/10  loss 3.0000  40 tok/s  ETA 0:01\033[K"
            "\rstep 2/10  loss 2.0000  40 tok/s  ETA 0:01\033[K\n");
}

TEST(ConsoleProgressTest, ARunWithNothingLeftSaysSo) {
  std::ostringstream out;
  ConsoleProgress p(&out, 300, 300, 8, Clock::time_point{});
  p.Finish(Clock::time_point{} + milliseconds(5));
  EXPECT_EQ(out.str(), "done: no steps to run (at step 300 of 300)\n");
}

}  // namespace
}  // namespace athanor
