// ThreadWorld: an in-process fake of the Communicator interface for tests,
// where each rank is a thread. Only AllReduceAsync (f32/bf16/f16, sum/max)
// is supported (the rest fail with Unimplemented); contributions are reduced in rank order
// with f32 accumulation, so results are deterministic. Optionally delays
// completion of every all-reduce until the test releases it (to check that
// callers overlap work with communication).
//
// Thread-safe: all state is behind one mutex. The world outlives its
// communicators.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/communicator.h"

namespace athanor {

class ThreadWorld {
 public:
  explicit ThreadWorld(int world_size) : world_size_(world_size) {}
  std::unique_ptr<Communicator> Join(int rank);
  int world_size() const { return world_size_; }

  // Number of AllReduceAsync calls issued by `rank` so far.
  int calls(int rank);

  struct Op {
    std::vector<const void*> send;
    std::vector<void*> recv;
    size_t count = 0;
    DataType type = DataType::kF32;
    ReduceOp op = ReduceOp::kSum;
    int arrived = 0;
    bool done = false;
  };
  // One rank's part of the `seq`-th use of `tag`; returns the op's key.
  using Key = std::pair<uint64_t, int64_t>;
  Key Contribute(int rank, uint64_t tag, const void* send, void* recv, size_t count, DataType type,
                 ReduceOp op);
  // Blocks until every rank contributed to `key`.
  void WaitDone(Key key);

 private:
  void Reduce(Op* op);

  const int world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Op> ops_;                            // guarded by mu_
  std::map<Key, int> finished_;                      // ranks that waited; guarded by mu_
  std::map<std::pair<int, uint64_t>, int64_t> seq_;  // (rank, tag) -> uses; guarded by mu_
  std::map<int, int> calls_;                         // guarded by mu_
};

}  // namespace athanor
