#include "collectives/ucx/ucx_tuning_env.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace athanor {
namespace {

// A lookup over a fixed map: the parser never sees the process environment.
EnvLookup Env(std::map<std::string, std::string> vars) {
  auto owned = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [owned](const std::string& name) -> std::optional<std::string> {
    auto it = owned->find(name);
    if (it == owned->end()) return std::nullopt;
    return it->second;
  };
}

TEST(UcxTuningFromEnv, NothingSetKeepsTheBase) {
  UcxTuning base;
  base.window = 7;
  auto t = UcxTuningFromEnv(Env({}), base);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->window, 7);
  EXPECT_EQ(t->segment_bytes, size_t{512} << 10);
  EXPECT_EQ(t->hierarchical_sockets, -1);
  EXPECT_EQ(t->socket_buffer_bytes, 0);
}

TEST(UcxTuningFromEnv, ReadsEveryKnob) {
  auto t = UcxTuningFromEnv(Env({{"ATHANOR_UCX_SEGMENT_BYTES", "1M"},
                                 {"ATHANOR_UCX_WINDOW", "8"},
                                 {"ATHANOR_UCX_SMALL_BYTES", "32768"},
                                 {"ATHANOR_UCX_PROGRESS_THREAD", "0"},
                                 {"ATHANOR_UCX_WAIT_NAP_US", "200"},
                                 {"ATHANOR_UCX_SHARED", "0"},
                                 {"ATHANOR_UCX_SHARED_MIN_BYTES", "4k"},
                                 {"ATHANOR_UCX_SHARED_CHUNK_BYTES", "256K"},
                                 {"ATHANOR_UCX_SHARED_SLOTS", "6"},
                                 {"ATHANOR_UCX_SHARED_ONE_SHOT_BYTES", "0"},
                                 {"ATHANOR_UCX_HIERARCHICAL", "0"},
                                 {"ATHANOR_UCX_HIERARCHICAL_MIN_BYTES", "1M"},
                                 {"ATHANOR_UCX_HIERARCHICAL_CHUNK_BYTES", "2M"},
                                 {"ATHANOR_UCX_HIERARCHICAL_SLOTS", "16"},
                                 {"ATHANOR_UCX_HIERARCHICAL_RING_MIN_BYTES", "1000000000000"},
                                 {"ATHANOR_UCX_HIERARCHICAL_SOCKETS", "1"},
                                 {"ATHANOR_UCX_SOCKET_BUFFER_BYTES", "4194304"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->segment_bytes, size_t{1} << 20);
  EXPECT_EQ(t->window, 8);
  EXPECT_EQ(t->small_bytes, 32768u);
  EXPECT_FALSE(t->progress_thread);
  EXPECT_EQ(t->wait_nap_us, 200);
  EXPECT_FALSE(t->shared_memory);
  EXPECT_EQ(t->shared_min_bytes, 4096u);
  EXPECT_EQ(t->shared_chunk_bytes, 256u << 10);
  EXPECT_EQ(t->shared_slots, 6);
  EXPECT_EQ(t->shared_one_shot_bytes, 0u);
  EXPECT_FALSE(t->hierarchical);
  EXPECT_EQ(t->hierarchical_min_bytes, 1u << 20);
  EXPECT_EQ(t->hierarchical_chunk_bytes, 2u << 20);
  EXPECT_EQ(t->hierarchical_slots, 16);
  EXPECT_EQ(t->hierarchical_ring_min_bytes, 1000000000000u);
  EXPECT_EQ(t->hierarchical_sockets, 1);
  EXPECT_EQ(t->socket_buffer_bytes, 4194304);
}

TEST(UcxTuningFromEnv, SocketsSwitchHasThreeValues) {
  for (auto [value, want] : {std::pair<const char*, int>{"0", 0}, {"1", 1}, {"auto", -1}}) {
    auto t = UcxTuningFromEnv(Env({{"ATHANOR_UCX_HIERARCHICAL_SOCKETS", value}}));
    ASSERT_TRUE(t.ok()) << value << ": " << t.status();
    EXPECT_EQ(t->hierarchical_sockets, want) << value;
  }
}

// Each bad value fails naming the variable and the value, never a silent 0.
TEST(UcxTuningFromEnv, BadValuesAreErrorsNamingTheVariable) {
  const std::pair<const char*, const char*> cases[] = {
      {"ATHANOR_UCX_WINDOW", "abc"},              // not a number
      {"ATHANOR_UCX_WINDOW", "-1"},               // negative
      {"ATHANOR_UCX_WINDOW", "0"},                // below the range
      {"ATHANOR_UCX_WINDOW", "4x"},               // trailing junk
      {"ATHANOR_UCX_WINDOW", ""},                 // empty
      {"ATHANOR_UCX_WINDOW", " 4"},               // spaces
      {"ATHANOR_UCX_WINDOW", "4K"},               // a suffix on a count
      {"ATHANOR_UCX_SEGMENT_BYTES", "2G"},        // above the range
      {"ATHANOR_UCX_SEGMENT_BYTES", "99999999999999999999"},  // overflows uint64
      {"ATHANOR_UCX_SEGMENT_BYTES", "18014398509481984K"},    // overflows once scaled
      {"ATHANOR_UCX_SHARED_SLOTS", "1"},
      {"ATHANOR_UCX_SHARED_CHUNK_BYTES", "100"},
      {"ATHANOR_UCX_SHARED", "yes"},
      {"ATHANOR_UCX_SHARED", "2"},
      {"ATHANOR_UCX_HIERARCHICAL_SOCKETS", "-1"},
      {"ATHANOR_UCX_WAIT_NAP_US", "1000001"},
      {"ATHANOR_UCX_SOCKET_BUFFER_BYTES", "2G"},
  };
  for (const auto& [name, value] : cases) {
    auto t = UcxTuningFromEnv(Env({{name, value}}));
    ASSERT_FALSE(t.ok()) << name << "=" << value;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string(name) + "='" + value + "'"), std::string::npos)
        << t.status();
  }
}

TEST(UcxTuningFromEnv, RangeIsInTheMessage) {
  auto t = UcxTuningFromEnv(Env({{"ATHANOR_UCX_SHARED_SLOTS", "300"}}));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "ATHANOR_UCX_SHARED_SLOTS='300' is not valid: expected a whole number from 2 to 256");
}

}  // namespace
}  // namespace athanor
