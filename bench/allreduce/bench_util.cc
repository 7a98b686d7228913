#include "bench/allreduce/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#ifdef ATHANOR_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "absl/strings/str_cat.h"
#include "collectives/reduce/reduce_kernels.h"

namespace athanor {
namespace {

double Input(int rank, size_t i) { return static_cast<double>(static_cast<int>((rank + i) % 5)) - 2; }

void Put(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kF32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::kF16: static_cast<uint16_t*>(buf)[i] = FloatToF16(static_cast<float>(v)); return;
    case DataType::kBF16: static_cast<uint16_t*>(buf)[i] = FloatToBf16(static_cast<float>(v)); return;
    case DataType::kI32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); return;
    case DataType::kI64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); return;
  }
}

double Get(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kF32: return static_cast<const float*>(buf)[i];
    case DataType::kF16: return F16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kI32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kI64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

}  // namespace

absl::StatusOr<size_t> ParseByteSize(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("empty size");
  size_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K': case 'k': mult = 1ull << 10; digits.pop_back(); break;
    case 'M': case 'm': mult = 1ull << 20; digits.pop_back(); break;
    case 'G': case 'g': mult = 1ull << 30; digits.pop_back(); break;
    default: break;
  }
  char* end = nullptr;
  unsigned long long v = std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0') {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a size like 8, 64K, 256M"));
  }
  return static_cast<size_t>(v) * mult;
}

std::string FormatBytes(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return absl::StrCat(bytes >> 30, " GiB");
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes, " B");
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

BenchBuffers::BenchBuffers(size_t bytes, bool device) : bytes_(std::max<size_t>(bytes, 8)), device_(device) {
#ifdef ATHANOR_HAVE_CUDA
  if (device_) {
    cudaMalloc(&send_, bytes_);
    cudaMalloc(&recv_, bytes_);
    host_.resize(bytes_);
    return;
  }
#endif
  send_ = aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096);
  recv_ = aligned_alloc(4096, (bytes_ + 4095) / 4096 * 4096);
  std::memset(send_, 0, bytes_);  // touch every page before timing
  std::memset(recv_, 0, bytes_);
}

BenchBuffers::~BenchBuffers() {
#ifdef ATHANOR_HAVE_CUDA
  if (device_) {
    cudaFree(send_);
    cudaFree(recv_);
    return;
  }
#endif
  free(send_);
  free(recv_);
}

void BenchBuffers::Fill(DataType type, size_t count, int rank) {
  std::vector<char> tmp(device_ ? bytes_ : 0);
  void* dst = device_ ? tmp.data() : send_;
  for (size_t i = 0; i < count; ++i) Put(type, dst, i, Input(rank, i));
#ifdef ATHANOR_HAVE_CUDA
  if (device_) {
    cudaMemcpy(send_, tmp.data(), bytes_, cudaMemcpyHostToDevice);
    cudaMemset(recv_, 0x5a, bytes_);
    return;
  }
#endif
  std::memset(recv_, 0x5a, bytes_);
}

size_t BenchBuffers::CountWrong(DataType type, ReduceOp op, size_t count, int world) {
  const void* got = recv_;
#ifdef ATHANOR_HAVE_CUDA
  if (device_) {
    cudaMemcpy(host_.data(), recv_, bytes_, cudaMemcpyDeviceToHost);
    got = host_.data();
  }
#endif
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r) {
      double v = Input(r, i);
      if (r == 0 || op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        want = r == 0 ? v : want + v;
      } else {
        want = op == ReduceOp::kMax ? std::max(want, v) : std::min(want, v);
      }
    }
    if (op == ReduceOp::kAvg) {
      char cell[8];
      if (type == DataType::kI32 || type == DataType::kI64) {
        want = static_cast<double>(static_cast<int64_t>(want) / world);
      } else {
        Put(type, cell, 0, static_cast<float>(want) / static_cast<float>(world));
        want = Get(type, cell, 0);
      }
    }
    if (Get(type, got, i) != want) ++wrong;
  }
  return wrong;
}

double MeasureMemcpyGBps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> gbps;
  for (int i = 0; i < 7; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(bytes / s / 1e9);
    a[i] = b[bytes - 1 - i];  // keep the copies observable
  }
  return Median(gbps);
}

}  // namespace athanor
