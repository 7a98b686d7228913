// Helpers for athanor-bench-allreduce: size parsing, statistics, and the
// buffers the benchmark works on (host memory, or device memory for nccl).
// Not thread-safe; one instance per rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/communicator.h"

namespace athanor {

// "8", "64K", "256M", "1G" (powers of 1024).
absl::StatusOr<size_t> ParseByteSize(const std::string& text);
// "8 B", "64 KiB", "256 MiB".
std::string FormatBytes(size_t bytes);
double Median(std::vector<double> v);

// The send and receive buffers of one size, on the host or the device.
class BenchBuffers {
 public:
  BenchBuffers(size_t bytes, bool device);
  ~BenchBuffers();
  BenchBuffers(const BenchBuffers&) = delete;
  BenchBuffers& operator=(const BenchBuffers&) = delete;

  void* send() { return send_; }
  void* recv() { return recv_; }
  // Fills send with rank-dependent small integers (exact in every dtype) and
  // recv with garbage.
  void Fill(DataType type, size_t count, int rank);
  // Elements of recv that differ from the exact sum over `world` ranks.
  size_t CountWrong(DataType type, ReduceOp op, size_t count, int world);

 private:
  const size_t bytes_;
  const bool device_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::vector<char> host_;  // staging for device buffers
};

// Copies `bytes` a few times; returns the median bandwidth in GB/s (1e9).
double MeasureMemcpyGBps(size_t bytes);

}  // namespace athanor
