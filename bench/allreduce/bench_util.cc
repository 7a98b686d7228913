#include "bench/allreduce/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#ifdef ATHANOR_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "absl/strings/str_cat.h"
#include "collectives/reduce/element_values.h"

namespace athanor {
namespace {

double Input(int rank, size_t i) { return static_cast<double>(static_cast<int>((rank + i) % 5)) - 2; }

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
  for (size_t i = 0; i < count; ++i) StoreElement(type, dst, i, Input(rank, i));
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
    double want = ExactReduction(type, op, world, [i](int r) { return Input(r, i); });
    if (LoadElement(type, got, i) != want) ++wrong;
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
