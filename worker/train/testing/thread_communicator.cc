#include "worker/train/testing/thread_communicator.h"

#include <algorithm>
#include <cstring>

#include "worker/model/half.h"
#include "worker/train/testing/all_reduce_only_communicator.h"

namespace athanor {
namespace {

float Load(DataType t, const void* p, size_t i) {
  switch (t) {
    case DataType::kF32:
      return static_cast<const float*>(p)[i];
    case DataType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kF16:
      return F16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return 0.0f;
  }
}

void Store(DataType t, void* p, size_t i, float v) {
  switch (t) {
    case DataType::kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case DataType::kBF16:
      static_cast<uint16_t*>(p)[i] = FloatToBf16(v);
      break;
    case DataType::kF16:
      static_cast<uint16_t*>(p)[i] = FloatToF16(v);
      break;
    default:
      break;
  }
}

class DoneWork final : public Work {
 public:
  DoneWork(ThreadWorld* world, ThreadWorld::Key key) : world_(world), key_(key) {}
  absl::Status Wait(std::chrono::milliseconds) override {
    if (!waited_) world_->WaitDone(key_);
    waited_ = true;
    return absl::OkStatus();
  }
  bool Done() override { return waited_; }

 private:
  ThreadWorld* world_;
  ThreadWorld::Key key_;
  bool waited_ = false;
};

class ThreadCommunicator final : public AllReduceOnlyCommunicator {
 public:
  ThreadCommunicator(ThreadWorld* world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_->world_size(); }
  std::string backend() const override { return "thread"; }
  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& o) override {
    return std::make_unique<DoneWork>(
        world_, world_->Contribute(rank_, o.tag, send, recv, count, type, op));
  }

 private:
  ThreadWorld* world_;
  int rank_;
};

}  // namespace

std::unique_ptr<Communicator> ThreadWorld::Join(int rank) {
  return std::make_unique<ThreadCommunicator>(this, rank);
}

int ThreadWorld::calls(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_[rank];
}

ThreadWorld::Key ThreadWorld::Contribute(int rank, uint64_t tag, const void* send, void* recv,
                                         size_t count, DataType type, ReduceOp op) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_[rank];
  const Key key{tag, seq_[{rank, tag}]++};
  Op& o = ops_[key];
  if (o.send.empty()) {
    o.send.assign(world_size_, nullptr);
    o.recv.assign(world_size_, nullptr);
  }
  o.send[rank] = send;
  o.recv[rank] = recv;
  o.count = count;
  o.type = type;
  o.op = op;
  if (++o.arrived == world_size_) {
    Reduce(&o);
    o.done = true;
    cv_.notify_all();
  }
  return key;
}

void ThreadWorld::Reduce(Op* o) {
  std::vector<float> acc(o->count);
  for (size_t i = 0; i < o->count; ++i) {
    float a = Load(o->type, o->send[0], i);
    for (int r = 1; r < world_size_; ++r) {
      const float v = Load(o->type, o->send[r], i);
      a = o->op == ReduceOp::kMax ? std::max(a, v) : a + v;
    }
    acc[i] = a;
  }
  for (int r = 0; r < world_size_; ++r) {
    for (size_t i = 0; i < o->count; ++i) Store(o->type, o->recv[r], i, acc[i]);
  }
}

void ThreadWorld::WaitDone(Key key) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ops_[key].done; });
  if (++finished_[key] == world_size_) {
    ops_.erase(key);
    finished_.erase(key);
  }
}

}  // namespace athanor
