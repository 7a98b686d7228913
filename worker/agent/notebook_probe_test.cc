#include "worker/agent/notebook_probe.h"

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

TEST(ParseKernels, CountsBusyAndTakesNewestActivity) {
  absl::StatusOr<KernelActivity> k = ParseKernels(
      R"([{"id":"a","execution_state":"busy","last_activity":"2026-12-03T23:03:32.391193Z"},
          {"id":"b","execution_state":"idle","last_activity":"2026-12-03T23:05:00Z"},
          {"id":"c","execution_state":"busy"}])");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->busy, 2);
  EXPECT_EQ(k->last_activity_unix, 1796339100);  // 2026-12-03T23:05:00Z
}

TEST(ParseKernels, NoKernels) {
  absl::StatusOr<KernelActivity> k = ParseKernels("[]");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->busy, 0);
  EXPECT_EQ(k->last_activity_unix, 0);
}

TEST(ParseKernels, RefusesWhatIsNotAKernelList) {
  EXPECT_EQ(ParseKernels("{").status().message(), "api/kernels: the reply is not JSON");
  EXPECT_EQ(ParseKernels("{}").status().message(), "api/kernels: the reply is not a JSON array");
  EXPECT_EQ(ParseKernels("[1]").status().message(), "api/kernels: an entry is not an object");
  EXPECT_EQ(ParseKernels(R"([{"last_activity":"yesterday"}])").status().message(),
            "api/kernels: last_activity is not an RFC 3339 time");
}

TEST(ProbeKernels, NoServerIsUnavailable) {
  absl::StatusOr<KernelActivity> k = ProbeKernels("/nonexistent/athanor-nb-1.sock", "/notebook/1/", "t", 100);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace athanor::agent
