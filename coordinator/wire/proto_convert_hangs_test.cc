// ProgressFromProto: what of a rank's progress page the coordinator keeps.
#include "coordinator/wire/proto_convert_hangs.h"

#include <gtest/gtest.h>

namespace athanor::coord {
namespace {

TEST(ProgressFromProtoTest, KeepsOnlyTheOpNamesTheRuntimeWrites) {
  rpc::RankProgress p;
  p.set_seen(true);
  for (const char* op : {"all-reduce", "barrier", "checkpoint save"}) {
    p.set_waiting_op(op);
    EXPECT_EQ(ProgressFromProto(p).waiting_op, op);
  }
  for (const char* op : {"", "checkpoint", "all-reduce\n", "<script>"}) {
    p.set_waiting_op(op);
    EXPECT_EQ(ProgressFromProto(p).waiting_op, "") << op;
  }
}

}  // namespace
}  // namespace athanor::coord
