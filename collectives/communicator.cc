#include "collectives/communicator.h"

#include "collectives/blocking_hint.h"

namespace athanor {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kF32: return 4;
    case DataType::kF16: return 2;
    case DataType::kBF16: return 2;
    case DataType::kI32: return 4;
    case DataType::kI64: return 8;
  }
  return 0;
}

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kF32: return "f32";
    case DataType::kF16: return "f16";
    case DataType::kBF16: return "bf16";
    case DataType::kI32: return "i32";
    case DataType::kI64: return "i64";
  }
  return "?";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

bool ParseDataType(const std::string& name, DataType* out) {
  for (DataType t : {DataType::kF32, DataType::kF16, DataType::kBF16, DataType::kI32,
                     DataType::kI64}) {
    if (name == DataTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool ParseReduceOp(const std::string& name, ReduceOp* out) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    if (name == ReduceOpName(op)) {
      *out = op;
      return true;
    }
  }
  return false;
}

namespace collectives_internal {
namespace {
thread_local bool in_blocking_call = false;
}  // namespace
bool InBlockingCall() { return in_blocking_call; }
BlockingCallScope::BlockingCallScope() : saved_(in_blocking_call) { in_blocking_call = true; }
BlockingCallScope::~BlockingCallScope() { in_blocking_call = saved_; }
}  // namespace collectives_internal

using collectives_internal::BlockingCallScope;

absl::Status Communicator::AllReduce(const void* send, void* recv, size_t count, DataType type,
                                     ReduceOp op, const CollectiveOptions& options) {
  std::unique_ptr<Work> work;
  {
    BlockingCallScope scope;
    work = AllReduceAsync(send, recv, count, type, op, options);
  }
  return work->Wait(options.timeout);
}

absl::Status Communicator::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                         DataType type, ReduceOp op,
                                         const CollectiveOptions& options) {
  std::unique_ptr<Work> work;
  {
    BlockingCallScope scope;
    work = ReduceScatterAsync(send, recv, recv_count, type, op, options);
  }
  return work->Wait(options.timeout);
}

absl::Status Communicator::AllGather(const void* send, void* recv, size_t send_count,
                                     DataType type, const CollectiveOptions& options) {
  std::unique_ptr<Work> work;
  {
    BlockingCallScope scope;
    work = AllGatherAsync(send, recv, send_count, type, options);
  }
  return work->Wait(options.timeout);
}

absl::Status Communicator::Broadcast(void* buffer, size_t count, DataType type, int root,
                                     const CollectiveOptions& options) {
  std::unique_ptr<Work> work;
  {
    BlockingCallScope scope;
    work = BroadcastAsync(buffer, count, type, root, options);
  }
  return work->Wait(options.timeout);
}

absl::Status Communicator::Barrier(const CollectiveOptions& options) {
  std::unique_ptr<Work> work;
  {
    BlockingCallScope scope;
    work = BarrierAsync(options);
  }
  return work->Wait(options.timeout);
}

}  // namespace athanor
