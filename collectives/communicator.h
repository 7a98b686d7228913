// Communicator: the collective operations ranks use to exchange gradients.
//
// One Communicator joins `world_size` ranks. Backends: "ucx" (host memory,
// default on CPU), "mpi" (Open MPI; reference and fallback), "nccl" (device
// memory, built when CUDA is found); created by name through the factory in
// collectives/factory.h.
//
// Threading: a Communicator may be called from several threads; calls are
// matched across ranks by their `tag`, so every rank must issue the same
// collectives with the same tags (in any order for distinct tags). Two
// concurrent calls must not share a tag. Buffers belong to the caller and must
// stay valid and untouched until the call (or the returned Work) completes.
//
// Errors: a dead or unreachable peer makes every pending and later call fail
// with Unavailable naming the peer rank, within the call's timeout; a timeout
// is DeadlineExceeded. After an error or Abort() the communicator is unusable.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace athanor {

enum class DataType { kF32, kF16, kBF16, kI32, kI64 };
enum class ReduceOp { kSum, kAvg, kMax, kMin };

size_t DataTypeSize(DataType t);
const char* DataTypeName(DataType t);  // "f32", "f16", "bf16", "i32", "i64"
const char* ReduceOpName(ReduceOp op);  // "sum", "avg", "max", "min"
bool ParseDataType(const std::string& name, DataType* out);
bool ParseReduceOp(const std::string& name, ReduceOp* out);

struct CollectiveOptions {
  // Matches this call across ranks; distinct for concurrent calls.
  uint64_t tag = 0;
  // How long the call may take before it fails with DeadlineExceeded.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// A pending asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until done or `timeout` passes (then DeadlineExceeded; the
  // operation keeps going and Wait may be called again). Returns the
  // operation's status once done.
  virtual absl::Status Wait(std::chrono::milliseconds timeout) = 0;
  // Non-blocking: true once Wait would return without blocking.
  virtual bool Done() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;  // "ucx", "mpi", "nccl"

  // All-reduce of `count` elements; `send == recv` is in-place. f16/bf16 are
  // accumulated in f32; kAvg divides the sum by world_size.
  virtual std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count,
                                               DataType type, ReduceOp op,
                                               const CollectiveOptions& options) = 0;
  // Rank r receives block r (`recv_count` elements) of the reduction of
  // `send` (recv_count * world_size elements).
  virtual std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv,
                                                   size_t recv_count, DataType type,
                                                   ReduceOp op,
                                                   const CollectiveOptions& options) = 0;
  // `recv` (send_count * world_size elements) holds every rank's `send` in rank order.
  virtual std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                               DataType type,
                                               const CollectiveOptions& options) = 0;
  // `buffer` on every rank takes root's contents.
  virtual std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type,
                                               int root, const CollectiveOptions& options) = 0;
  virtual std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& options) = 0;

  // Ends all outstanding work (each fails with Aborted) and makes later calls fail.
  virtual void Abort() = 0;

  // Blocking forms: the async call followed by Wait(options.timeout).
  absl::Status AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                         const CollectiveOptions& options = {});
  absl::Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type,
                             ReduceOp op, const CollectiveOptions& options = {});
  absl::Status AllGather(const void* send, void* recv, size_t send_count, DataType type,
                         const CollectiveOptions& options = {});
  absl::Status Broadcast(void* buffer, size_t count, DataType type, int root,
                         const CollectiveOptions& options = {});
  absl::Status Barrier(const CollectiveOptions& options = {});
};

}  // namespace athanor
