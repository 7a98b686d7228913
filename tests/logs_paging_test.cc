// `athanor logs` of a job whose ranks' logs together pass gRPC's 4 MiB message
// limit: 8 ranks on two agents, each writing more than 1 MiB. The coordinator
// pages GetLogs (at most 3 MiB a reply) and the CLI reads every page.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/cluster_harness.h"

namespace athanor::testing {
namespace {

constexpr size_t kLogTail = 1 << 20;  // what GetLogs keeps of each rank's log
constexpr int kRanks = 8;

// Each rank writes 1,100,000 'a's, then a line naming itself.
const char kScript[] = "head -c 1100000 /dev/zero | tr '\\000' a; printf '\\nrank %s end\\n' \"$RANK\"";

std::string ExpectedTail(int rank) {
  std::string end = absl::StrCat("\nrank ", rank, " end\n");
  return std::string(kLogTail - end.size(), 'a') + end;
}

class LogsPagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartCoordinator();
    cluster_.StartAgent("node-a", kRanks / 2);
    cluster_.StartAgent("node-b", kRanks / 2);
    ASSERT_TRUE(cluster_.WaitForNodesUp(2)) << cluster_.CoordinatorLog();
    CliResult submit = cluster_.Cli({"submit", "--name", "big-logs", "--nodes", "2",
                                     "--gpus-per-node", std::to_string(kRanks / 2), "--", "sh",
                                     "-c", kScript});
    ASSERT_EQ(submit.exit_code, 0) << submit.err;
    id_ = submit.out.substr(0, submit.out.find('\n'));
    CliResult wait = cluster_.Cli({"wait", id_, "--timeout", "60"});
    ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err << cluster_.CoordinatorLog();
  }
  LocalCluster cluster_;
  std::string id_;
};

TEST_F(LogsPagingTest, CliPrintsEveryRanksLastMiB) {
  CliResult logs = cluster_.Cli({"logs", id_});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  std::string expected;
  for (int r = 0; r < kRanks; ++r) {
    std::string prefix = absl::StrCat("[rank ", r, "] ");
    std::string tail = ExpectedTail(r);
    // PrefixLines: every line of the tail, prefixed.
    absl::StrAppend(&expected, prefix, tail.substr(0, tail.find('\n')), "\n", prefix, "rank ", r,
                    " end\n");
  }
  EXPECT_EQ(logs.out.size(), expected.size());
  EXPECT_TRUE(logs.out == expected) << "output differs from the expected " << expected.size()
                                    << " bytes; its first 200: " << logs.out.substr(0, 200);
}

TEST_F(LogsPagingTest, RepliesHoldTwoFullRanksEach) {
  // 1 MiB per rank and at most 3 MiB per reply, counting each rank's largest
  // possible entry before reading it: two ranks a page.
  for (int start = 0; start < kRanks; start += 2) {
    SCOPED_TRACE(absl::StrCat("page_start ", start));
    rpc::GetLogsRequest req;
    req.set_job_id(id_);
    req.set_rank(-1);
    req.set_page_start(start);
    rpc::GetLogsResponse page;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    grpc::Status s = cluster_.stub().GetLogs(&ctx, req, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(page.attempt(), 1);
    EXPECT_EQ(page.next_page_start(), start + 2 < kRanks ? start + 2 : 0);
    ASSERT_EQ(page.logs_size(), 2);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(page.logs(i).rank(), start + i);
      EXPECT_EQ(page.logs(i).error(), "");
      EXPECT_TRUE(page.logs(i).data() == ExpectedTail(start + i))
          << "rank " << start + i << ": " << page.logs(i).data().size() << " bytes";
    }
  }
  rpc::GetLogsRequest past;
  past.set_job_id(id_);
  past.set_rank(-1);
  past.set_page_start(kRanks);
  rpc::GetLogsResponse none;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Status s = cluster_.stub().GetLogs(&ctx, past, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "page_start: 8 is past the 8 rank(s) selected");
}

}  // namespace
}  // namespace athanor::testing
