// What the agent accepts of a job network from the coordinator, and of
// --net-allow; the host side itself is tested across namespace hosts
// (tests/cross_host/job_network_netns_test.sh).
#include "worker/agent/job_network.h"

#include <gtest/gtest.h>

namespace athanor::agent {
namespace {

JobNetworkSpec TwoNodes() {
  JobNetworkSpec s;
  s.address = "10.64.3.2";
  s.prefix_length = 24;
  s.peers = {{"10.64.3.1", "192.0.2.1"}, {"10.64.3.2", "node-b.example"}};
  return s;
}

TEST(ValidateJobNetworkTest, AcceptsAnAttemptsSlash24AndNamesWhatIsWrongOtherwise) {
  EXPECT_TRUE(ValidateJobNetwork(TwoNodes()).ok());
  JobNetworkSpec s = TwoNodes();
  s.address = "";
  EXPECT_EQ(ValidateJobNetwork(s).code(), absl::StatusCode::kFailedPrecondition);
  s = TwoNodes();
  s.prefix_length = 16;
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network prefix /16: expected /24");
  s = TwoNodes();
  s.peers[0].address = "10.64.4.1";
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network peer '10.64.4.1' is not a distinct host address of 10.64.3.0/24");
  s = TwoNodes();
  s.peers[0].address = "10.64.3.2";
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network peer '10.64.3.2' is not a distinct host address of 10.64.3.0/24");
  s = TwoNodes();
  s.peers[1].host = "a b";
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network peer 10.64.3.2: host 'a b' is not an address or host name");
  s = TwoNodes();
  s.peers.pop_back();
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network address 10.64.3.2 is not among its peers");
  s = TwoNodes();
  s.address = "fe80::1";
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network address 'fe80::1' is not IPv4");
  s = TwoNodes();
  s.peers.resize(255, {"10.64.3.9", "h"});
  EXPECT_EQ(ValidateJobNetwork(s).message(), "network peers: 255, expected 1 to 254");
}

TEST(ParseNetAllowTest, TakesCidrAndOptionalPort) {
  absl::StatusOr<NetAllow> a = ParseNetAllow("10.0.0.53:53");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cidr, "10.0.0.53/32");
  EXPECT_EQ(a->port, 53);
  a = ParseNetAllow("192.168.7.9/16");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cidr, "192.168.0.0/16");
  EXPECT_EQ(a->port, 0);
  EXPECT_EQ(ParseNetAllow("10.0.0.1:0").status().message(), "--net-allow '10.0.0.1:0': the port must be 1..65535");
  EXPECT_EQ(ParseNetAllow("10.0.0.1/33").status().message(),
            "--net-allow '10.0.0.1/33': expected an IPv4 address or A.B.C.D/P");
  EXPECT_EQ(ParseNetAllow("s3.example:443").status().message(),
            "--net-allow 's3.example:443': expected an IPv4 address or A.B.C.D/P");
  EXPECT_EQ(ParseNetAllow("1.2.3.4:5:6").status().message(), "--net-allow '1.2.3.4:5:6': expected CIDR[:PORT]");
}

}  // namespace
}  // namespace athanor::agent
