// The conformance suite on the mpi backend. Under mpirun (see the ctest
// entries collectives_mpi_conformance_np*) every rank runs it; started alone
// it checks that the backend refuses to start without mpirun.
#include "collectives/mpi/mpi_communicator.h"

#include <cstdlib>

#include "collectives/testing/conformance.h"
#include "common/rank_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

using ::testing::HasSubstr;

TEST(MpiCommunicator, Conformance) {
  if (!StartedByMpirun()) GTEST_SKIP() << "not started by mpirun";
  auto env = ParseRankEnv(ProcessEnv());
  ASSERT_TRUE(env.ok()) << env.status();
  CommunicatorOptions o;
  o.backend = "mpi";
  o.rank = env->rank;
  o.world_size = env->world_size;
  auto comm = CreateCommunicator(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "mpi");
  ConformanceOptions c;
  if (env->world_size > 4) c.big_counts = {};
  absl::Status s = RunConformance(comm->get(), c);
  EXPECT_TRUE(s.ok()) << "rank " << env->rank << ": " << s;
}

TEST(MpiCommunicator, RefusesToStartWithoutMpirun) {
  if (StartedByMpirun()) GTEST_SKIP() << "started by mpirun";
  CommunicatorOptions o;
  o.backend = "mpi";
  o.rank = 0;
  o.world_size = 2;
  auto comm = CreateCommunicator(o);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(comm.status().message(), HasSubstr("needs the ranks to be started by mpirun"));
}

}  // namespace
}  // namespace athanor
