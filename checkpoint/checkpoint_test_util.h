// Test helpers: deterministic training states and ranks-as-threads.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/training_state.h"

namespace athanor::testing_util {

// Value of element (row, col) of tensor `id` at `step`; exact in float.
inline float Value(int64_t step, int id, int64_t row, int64_t col) {
  return static_cast<float>(step * 1000 + id * 100 + row * 10 + col);
}

// A rank's state: "w" replicated [5, 4] f32, "opt" sharded by rows [rows, 4]
// of a [total_rows, 4] tensor split evenly across world_size ranks.
struct RankState {
  std::vector<float> w;
  std::vector<float> opt;
  TrainingState state;
};

inline void FillRankState(RankState* s, int64_t step, int rank, int world_size, int total_rows = 6) {
  const int rows = total_rows / world_size;
  s->w.resize(5 * 4);
  s->opt.resize(rows * 4);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 4; ++c) s->w[r * 4 + c] = Value(step, 1, r, c);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < 4; ++c) s->opt[r * 4 + c] = Value(step, 2, rank * rows + r, c);
  s->state.tensors = {
      {"w", TensorDType::kF32, {5, 4}, s->w.data(), s->w.size() * 4, {}},
      {"opt", TensorDType::kF32, {rows, 4}, s->opt.data(), s->opt.size() * 4,
       ShardSpec{rank * rows, total_rows}}};
  s->state.metadata = {{"rng_state", "rng-" + std::to_string(rank)},
                       {"data_cursor", std::to_string(step * 10)}};
}

// Runs fn(rank) on `world_size` threads and joins them.
inline void RunRanks(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace athanor::testing_util
