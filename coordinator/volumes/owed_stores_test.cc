// OwedStores: an ended attempt owes one store per read-write volume from
// each node where one of its ranks started, and each debt ends once: by its
// store call, by its node's loss, or at its bound.
#include "coordinator/volumes/owed_stores.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace athanor::coord {
namespace {

// Job 5's attempt 2: ranks 0 (started, on n1) and 1 (never started, on n2),
// mounting `data` read-write and `in` read-only.
JobRecord Ended() {
  JobRecord job;
  job.id = std::string("5");  // (not operator=(const char*): a GCC 12 -Wrestrict false alarm)
  job.attempt = 2;
  job.spec.volumes = {{"data", "/data", false}, {"in", "/in", true}};
  job.allocation = {{0, "n1"}, {1, "n2"}};
  job.ranks.resize(2);
  job.ranks[0].started = true;
  return job;
}

std::vector<std::string> Names(const std::vector<OwedStores::Owed>& owed) {
  std::vector<std::string> out;
  for (const OwedStores::Owed& o : owed) {
    out.push_back(absl::StrCat(o.job_id, "/", o.attempt, "/", o.node, "/", o.volume));
  }
  return out;
}

TEST(OwedStores, OwesFromStartedRanksNodesAndEndsOnce) {
  OwedStores owed(Seconds(600));
  const TimePoint t0{};
  owed.AttemptEnded(Ended(), t0, [](const std::string&) { return false; }, true);
  ASSERT_EQ(owed.Jobs(), (std::set<std::string>{"5"}));
  const std::optional<OwedStores::Owed> first = owed.First("5");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(Names({*first}), (std::vector<std::string>{"5/2/n1/data"}));
  EXPECT_EQ(first->until, t0 + Seconds(600));
  EXPECT_FALSE(owed.Reported("n2", "5", 2, "data"));  // another node's call
  EXPECT_FALSE(owed.Reported("n1", "5", 1, "data"));  // another attempt's
  EXPECT_FALSE(owed.Reported("n1", "5", 2, "in"));    // read-only: never owed
  EXPECT_TRUE(owed.Reported("n1", "5", 2, "data"));
  EXPECT_FALSE(owed.Reported("n1", "5", 2, "data"));
  EXPECT_TRUE(owed.Jobs().empty());
}

TEST(OwedStores, ALostNodeAndTheBoundEndDebts) {
  OwedStores owed(Seconds(600));
  const TimePoint t0{};
  owed.AttemptEnded(Ended(), t0, [](const std::string& node) { return node == "n1"; }, true);
  EXPECT_TRUE(owed.Jobs().empty());  // n1 is DOWN already: owes nothing
  owed.AttemptEnded(Ended(), t0, [](const std::string&) { return false; }, true);
  EXPECT_TRUE(owed.NodeLost("n2").empty());
  EXPECT_EQ(Names(owed.NodeLost("n1")), (std::vector<std::string>{"5/2/n1/data"}));
  owed.AttemptEnded(Ended(), t0, [](const std::string&) { return false; }, true);
  EXPECT_TRUE(owed.Expire(t0 + Seconds(599)).empty());
  EXPECT_EQ(Names(owed.Expire(t0 + Seconds(600))), (std::vector<std::string>{"5/2/n1/data"}));
  EXPECT_TRUE(owed.Jobs().empty());
}

TEST(OwedStores, AStoreEndedBeforeTheAttemptIsOwesNothing) {
  OwedStores owed(Seconds(600));
  owed.EndedEarly("n1", "5", 2, "data");
  owed.AttemptEnded(Ended(), TimePoint{}, [](const std::string&) { return false; }, true);
  EXPECT_TRUE(owed.Jobs().empty());
  // Used once: the next attempt's end owes again.
  owed.AttemptEnded(Ended(), TimePoint{}, [](const std::string&) { return false; }, true);
  EXPECT_EQ(owed.Jobs(), (std::set<std::string>{"5"}));
  // A finished job owes nothing, and its early reports are dropped.
  owed.Forget("5");
  owed.EndedEarly("n1", "5", 2, "data");
  owed.AttemptEnded(Ended(), TimePoint{}, [](const std::string&) { return false; }, false);
  owed.AttemptEnded(Ended(), TimePoint{}, [](const std::string&) { return false; }, true);
  EXPECT_EQ(owed.Jobs(), (std::set<std::string>{"5"}));
}

}  // namespace
}  // namespace athanor::coord
