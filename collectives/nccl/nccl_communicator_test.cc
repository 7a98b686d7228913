// The conformance suite on the nccl backend. The suite works on host memory,
// so a test-only decorator stages every buffer through device memory. One GPU
// holds one NCCL rank, so the world is 1 per device present (here: 1).
#include "collectives/nccl/nccl_communicator.h"

#include <cuda_runtime.h>

#include "collectives/local_communicator.h"
#include "collectives/testing/conformance.h"
#include "common/net.h"
#include "gtest/gtest.h"

namespace athanor {
namespace {

// Copies host buffers to the device, runs the call, copies the result back.
// Blocking; keeps in-place calls in-place on the device.
class HostStaging final : public Communicator {
 public:
  explicit HostStaging(Communicator* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend() const override { return inner_->backend(); }

  std::unique_ptr<Work> AllReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, const CollectiveOptions& o) override {
    size_t bytes = count * DataTypeSize(type);
    return Staged(send, bytes, recv, bytes, [&](const void* ds, void* dr) {
      return inner_->AllReduce(ds, dr, count, type, op, o);
    });
  }
  std::unique_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           const CollectiveOptions& o) override {
    size_t bytes = recv_count * DataTypeSize(type);
    return Staged(send, bytes * world_size(), recv, bytes, [&](const void* ds, void* dr) {
      return inner_->ReduceScatter(ds, dr, recv_count, type, op, o);
    });
  }
  std::unique_ptr<Work> AllGatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, const CollectiveOptions& o) override {
    size_t bytes = send_count * DataTypeSize(type);
    return Staged(send, bytes, recv, bytes * world_size(), [&](const void* ds, void* dr) {
      return inner_->AllGather(ds, dr, send_count, type, o);
    });
  }
  std::unique_ptr<Work> BroadcastAsync(void* buffer, size_t count, DataType type, int root,
                                       const CollectiveOptions& o) override {
    size_t bytes = count * DataTypeSize(type);
    return Staged(buffer, bytes, buffer, bytes, [&](const void*, void* dr) {
      return inner_->Broadcast(dr, count, type, root, o);
    });
  }
  std::unique_ptr<Work> BarrierAsync(const CollectiveOptions& o) override {
    return MakeDoneWork(inner_->Barrier(o));
  }
  void Abort() override { inner_->Abort(); }

 private:
  template <typename F>
  std::unique_ptr<Work> Staged(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                               F call) {
    // One device allocation covering the host range of both buffers keeps aliasing intact.
    const char* lo = std::min(static_cast<const char*>(send), static_cast<const char*>(recv));
    const char* hi = std::max(static_cast<const char*>(send) + send_bytes,
                              static_cast<const char*>(recv) + recv_bytes);
    size_t span = hi - lo;
    char* dev = nullptr;
    if (cudaMalloc(&dev, span + 1) != cudaSuccess) {
      return MakeDoneWork(absl::ResourceExhaustedError("cudaMalloc"));
    }
    size_t so = static_cast<const char*>(send) - lo, ro = static_cast<const char*>(recv) - lo;
    cudaMemcpy(dev + so, send, send_bytes, cudaMemcpyHostToDevice);
    absl::Status s = call(dev + so, dev + ro);
    cudaMemcpy(recv, dev + ro, recv_bytes, cudaMemcpyDeviceToHost);
    cudaFree(dev);
    return MakeDoneWork(s);
  }

  Communicator* inner_;
};

TEST(NcclCommunicator, ConformanceOnOneGpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  CommunicatorOptions o;
  o.backend = "nccl";
  o.master_port = *port;
  auto comm = CreateCommunicator(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "nccl");
  HostStaging staged(comm->get());
  absl::Status s = RunConformance(&staged);
  EXPECT_TRUE(s.ok()) << s;
}

// After Abort() nothing uses the communicator: calls answer Aborted (before,
// Abort() left a later enqueue and the destructor to touch the aborted
// communicator).
TEST(NcclCommunicator, NothingUsesTheCommunicatorAfterAbort) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  CommunicatorOptions o;
  o.backend = "nccl";
  o.master_port = *port;
  auto comm = CreateNcclCommunicator(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  (*comm)->Abort();
  (*comm)->Abort();  // twice is harmless
  absl::Status s = (*comm)->Barrier();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  comm->reset();  // must not destroy the aborted communicator again
}

TEST(NcclCommunicator, NoDeviceIsFailedPrecondition) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  CommunicatorOptions o;
  o.backend = "nccl";
  auto comm = CreateCommunicator(o);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(comm.status().message(), "nccl: no CUDA device");
}

}  // namespace
}  // namespace athanor
