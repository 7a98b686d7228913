#include "common/coordinator_targets.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

TEST(CoordinatorTargets, OneAddressStaysAsGiven) {
  absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor("coord.example:7700");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "coord.example:7700");
  EXPECT_EQ(t->service_config, "");  // pick_first, no health checks: as before
}

TEST(CoordinatorTargets, ListBecomesAddressesInOrder) {
  absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor("127.0.0.2:7701, 127.0.0.1:7700,127.0.0.3:7702");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv4:127.0.0.2:7701,127.0.0.1:7700,127.0.0.3:7702");
  EXPECT_EQ(t->service_config,
            R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":"athanor.leader"}})");
}

TEST(CoordinatorTargets, HostNamesAreResolved) {
  absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor("localhost:7700,127.0.0.9:7709");
  ASSERT_TRUE(t.ok()) << t.status();
  // localhost has an IPv4 address on every machine the tests run on.
  EXPECT_EQ(t->target.substr(0, 5), "ipv4:");
  EXPECT_NE(t->target.find("127.0.0.1:7700"), std::string::npos) << t->target;
  EXPECT_EQ(t->target.substr(t->target.size() - 15), ",127.0.0.9:7709");
  EXPECT_FALSE(t->service_config.empty());
}

TEST(CoordinatorTargets, Ipv6) {
  absl::StatusOr<CoordinatorTarget> t = CoordinatorTargetFor("[::1]:7700,[::1]:7701");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv6:[::1]:7700,[::1]:7701");
}

TEST(CoordinatorTargets, BadEntriesAreNamed) {
  EXPECT_EQ(CoordinatorTargetFor("a:1,,b:2").status().message(), "coordinator list 'a:1,,b:2': an empty entry");
  EXPECT_EQ(CoordinatorTargetFor("a:1,b").status().message(),
            "coordinator 'b': expected HOST:PORT (an IPv6 address in brackets)");
  EXPECT_EQ(CoordinatorTargetFor("a:0").status().message(),
            "coordinator 'a:0': expected HOST:PORT with a port in 1..65535");
  EXPECT_EQ(CoordinatorTargetFor("[::1:7700").status().message(), "coordinator '[::1:7700': expected [IPV6]:PORT");
  EXPECT_EQ(CoordinatorTargetFor("127.0.0.1:1,[::1]:2").status().message(),
            "coordinator list '127.0.0.1:1,[::1]:2': some hosts have only IPv4 addresses and others only IPv6; "
            "use one family");
  EXPECT_EQ(CoordinatorTargetFor("127.0.0.1:1,no-such-host.invalid:2").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace athanor
