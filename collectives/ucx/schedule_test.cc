#include "collectives/ucx/schedule.h"

#include "gtest/gtest.h"

namespace athanor {
namespace {

TEST(Schedule, RingAllReduceHasTwoPhasesPerSegment) {
  ScheduleParams p;
  p.rank = 1;
  p.world_size = 3;
  p.segment_bytes = 1024;
  std::vector<char> scratch(ScratchBytes(p));
  p.scratch = scratch.data();
  std::vector<float> buf(3 * 256 * 2 + 1);  // 2 segments per block, uneven blocks
  Schedule s = RingAllReduce(p, buf.data(), buf.data(), buf.size());
  ASSERT_EQ(s.chains.size(), 3u);  // the first block has 513 elements
  EXPECT_EQ(s.chains[0].steps.size(), 4u);
  const Step& first = s.chains[0].steps[0];
  EXPECT_EQ(first.send_peer, 2);
  EXPECT_EQ(first.recv_peer, 0);
  EXPECT_EQ(first.send_bytes, 1024u);
  // rank 1 first sends block 0 (r - 1) and receives block 2 (r - 2).
  EXPECT_EQ(first.send_buf, buf.data());
  EXPECT_EQ(first.reduce_dst, buf.data() + 513 + 512);
  EXPECT_EQ(s.chains[2].steps[0].send_bytes, 4u);  // block 0's last element
  EXPECT_EQ(s.pre_copy_bytes, 0u);
}

TEST(Schedule, RecursiveDoublingFoldsExtraRanks) {
  ScheduleParams p;
  p.world_size = 7;
  std::vector<char> scratch(64);
  p.scratch = scratch.data();
  int32_t buf[4];
  p.rank = 6;  // an extra rank: give, then take
  Schedule extra = RecursiveDoublingAllReduce(p, buf, buf, 4);
  ASSERT_EQ(extra.chains[0].steps.size(), 2u);
  EXPECT_EQ(extra.chains[0].steps[0].send_peer, 2);
  EXPECT_EQ(extra.chains[0].steps[1].recv_peer, 2);
  p.rank = 2;  // its partner: fold, 2 doubling steps, give back
  Schedule partner = RecursiveDoublingAllReduce(p, buf, buf, 4);
  ASSERT_EQ(partner.chains[0].steps.size(), 4u);
  EXPECT_EQ(partner.chains[0].steps[1].send_peer, 3);
  EXPECT_EQ(partner.chains[0].steps[2].send_peer, 0);
  EXPECT_EQ(partner.chains[0].steps[3].msg, extra.chains[0].steps[1].msg);
}

TEST(Schedule, BarrierIsLogarithmic) {
  ScheduleParams p;
  p.rank = 0;
  p.world_size = 7;
  Schedule s = DisseminationBarrier(p);
  ASSERT_EQ(s.chains[0].steps.size(), 3u);
  EXPECT_EQ(s.chains[0].steps[2].send_peer, 4);
  EXPECT_EQ(s.chains[0].steps[2].recv_peer, 3);
}

}  // namespace
}  // namespace athanor
