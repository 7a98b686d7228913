#include "coordinator/scheduler/accounting.h"

#include <gtest/gtest.h>

namespace athanor::sched {
namespace {

TEST(AccountingTest, GpuSecondsSurviveRequeueExactly) {
  Accounting a;
  TimePoint t0{};
  a.Start("j1", "t", 4, t0);
  EXPECT_EQ(a.GpusInUse("t"), 4);
  EXPECT_DOUBLE_EQ(a.JobGpuSeconds("j1", t0 + std::chrono::seconds(10)), 40.0);
  a.Stop("j1", t0 + std::chrono::seconds(10));  // preempted
  EXPECT_EQ(a.GpusInUse("t"), 0);
  a.Start("j1", "t", 4, t0 + std::chrono::seconds(100));  // re-admitted
  a.Start("j2", "t", 1, t0 + std::chrono::seconds(100));
  EXPECT_EQ(a.GpusInUse("t"), 5);
  a.Stop("j1", t0 + std::chrono::milliseconds(100500));
  EXPECT_DOUBLE_EQ(a.JobGpuSeconds("j1", t0 + std::chrono::seconds(999)), 42.0);
  EXPECT_DOUBLE_EQ(a.TenantGpuSeconds("t", t0 + std::chrono::seconds(101)), 43.0);
  auto rows = a.Usage(t0 + std::chrono::seconds(101));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].job, "");
  EXPECT_DOUBLE_EQ(rows[0].gpu_seconds, 43.0);
  EXPECT_EQ(rows[0].gpus_in_use, 1);
  EXPECT_EQ(rows[1].job, "j1");
  EXPECT_EQ(rows[2].job, "j2");
  EXPECT_DOUBLE_EQ(rows[2].gpu_seconds, 1.0);
}

}  // namespace
}  // namespace athanor::sched
