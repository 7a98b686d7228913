#include "common/rank_env.h"

#include <gtest/gtest.h>

namespace athanor {
namespace {

EnvLookup FromMap(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(RankEnv, AloneIsWorldOfOne) {
  auto env = ParseRankEnv(FromMap({}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->source, RankEnvSource::kAlone);
}

TEST(RankEnv, ContractRoundTrips) {
  RankEnv in;
  in.rank = 3;
  in.world_size = 4;
  in.local_rank = 1;
  in.local_world_size = 2;
  in.node_rank = 1;
  in.master_addr = "10.0.0.1";
  in.master_port = 29500;
  in.job_id = "17";
  in.attempt = 2;
  in.checkpoint_uri = "file:///tmp/c";
  in.coordinator = "127.0.0.1:7000";
  const std::map<std::string, std::string> contract = in.ToEnvironment();
  // torchrun's elastic additions: node 1 of 2, the second attempt.
  EXPECT_EQ(contract.at("GROUP_RANK"), "1");
  EXPECT_EQ(contract.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(contract.at("ROLE_RANK"), "3");
  EXPECT_EQ(contract.at("ROLE_WORLD_SIZE"), "4");
  EXPECT_EQ(contract.at("TORCHELASTIC_RUN_ID"), "17");
  EXPECT_EQ(contract.at("TORCHELASTIC_RESTART_COUNT"), "1");
  auto out = ParseRankEnv(FromMap(contract));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->rank, 3);
  EXPECT_EQ(out->world_size, 4);
  EXPECT_EQ(out->local_rank, 1);
  EXPECT_EQ(out->local_world_size, 2);
  EXPECT_EQ(out->node_rank, 1);
  EXPECT_EQ(out->master_addr, "10.0.0.1");
  EXPECT_EQ(out->master_port, 29500);
  EXPECT_EQ(out->job_id, "17");
  EXPECT_EQ(out->attempt, 2);
  EXPECT_EQ(out->checkpoint_uri, "file:///tmp/c");
  EXPECT_EQ(out->coordinator, "127.0.0.1:7000");
  EXPECT_EQ(out->source, RankEnvSource::kContract);
}

TEST(RankEnv, FallsBackToOpenMpi) {
  auto env = ParseRankEnv(FromMap({{"OMPI_COMM_WORLD_RANK", "1"},
                                   {"OMPI_COMM_WORLD_SIZE", "3"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->local_world_size, 3);
  EXPECT_EQ(env->source, RankEnvSource::kOpenMpi);
}

TEST(RankEnv, RejectsBadValues) {
  auto bad = ParseRankEnv(FromMap({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("RANK='x'"), std::string::npos);
  EXPECT_EQ(ParseRankEnv(FromMap({{"RANK", "2"}, {"WORLD_SIZE", "2"}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRankEnv(FromMap({{"RANK", "0"}})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor

namespace athanor {
namespace {

EnvLookup Vars(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(RendezvousEnv, AbsentMeansNoSecretAndNoDescriptor) {
  absl::StatusOr<RendezvousEnv> env = ParseRendezvousEnv(Vars({}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->secret, "");
  EXPECT_EQ(env->listen_fd, -1);
}

TEST(RendezvousEnv, SecretAndDescriptorAreRead) {
  absl::StatusOr<RendezvousEnv> env = ParseRendezvousEnv(
      Vars({{"ATHANOR_RENDEZVOUS_SECRET", "0123456789abcdef"}, {"ATHANOR_RENDEZVOUS_LISTEN_FD", "3"}}));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->secret, "0123456789abcdef");
  EXPECT_EQ(env->listen_fd, 3);
}

TEST(RendezvousEnv, BadValuesAreClearErrors) {
  EXPECT_EQ(ParseRendezvousEnv(Vars({{"ATHANOR_RENDEZVOUS_SECRET", "short"}})).status(),
            absl::InvalidArgumentError("environment variable ATHANOR_RENDEZVOUS_SECRET holds 5 characters; a "
                                       "rendezvous secret has at least 16"));
  EXPECT_EQ(ParseRendezvousEnv(Vars({{"ATHANOR_RENDEZVOUS_LISTEN_FD", "1"}})).status(),
            absl::InvalidArgumentError(
                "environment variable ATHANOR_RENDEZVOUS_LISTEN_FD=1 is not an inherited descriptor (>= 3)"));
  EXPECT_EQ(ParseRendezvousEnv(Vars({{"ATHANOR_RENDEZVOUS_LISTEN_FD", "3x"}})).status(),
            absl::InvalidArgumentError(
                "environment variable ATHANOR_RENDEZVOUS_LISTEN_FD='3x' is not a non-negative integer"));
}

}  // namespace
}  // namespace athanor
