// cuBLAS implementation of MatMul (built when ATHANOR_HAVE_CUDA).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "worker/model/matmul.h"

namespace athanor {

bool CudaDevicePresent(std::string* why_not) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why_not = absl::StrCat("no usable GPU: ", cudaGetErrorString(err));
    return false;
  }
  if (count == 0) {
    *why_not = "no GPU visible (cudaGetDeviceCount = 0)";
    return false;
  }
  return true;
}

namespace {

// A device buffer that only grows.
class DeviceBuffer {
 public:
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  float* Get(size_t n) {
    if (n > size_) {
      if (ptr_ != nullptr) cudaFree(ptr_);
      ptr_ = nullptr;
      if (cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(float)) != cudaSuccess) {
        size_ = 0;
        return nullptr;
      }
      size_ = n;
    }
    return ptr_;
  }

 private:
  float* ptr_ = nullptr;
  size_t size_ = 0;
};

class CudaMatMul final : public MatMul {
 public:
  explicit CudaMatMul(cublasHandle_t handle) : handle_(handle) {}
  ~CudaMatMul() override { cublasDestroy(handle_); }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    // Row-major A (trans_a ? k x m : m x k) occupies rows * lda floats.
    const size_t a_n = static_cast<size_t>(trans_a ? k : m) * lda;
    const size_t b_n = static_cast<size_t>(trans_b ? n : k) * ldb;
    const size_t c_n = static_cast<size_t>(m) * ldc;
    float* da = a_.Get(a_n);
    float* db = b_.Get(b_n);
    float* dc = c_.Get(c_n);
    if (da == nullptr || db == nullptr || dc == nullptr) return;  // out of device memory
    cudaMemcpy(da, a, a_n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, b_n * sizeof(float), cudaMemcpyHostToDevice);
    if (beta != 0.0f) cudaMemcpy(dc, c, c_n * sizeof(float), cudaMemcpyHostToDevice);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                n, m, k, &alpha, db, ldb, da, lda, &beta, dc, ldc);
    cudaMemcpy(c, dc, c_n * sizeof(float), cudaMemcpyDeviceToHost);
  }
  std::string device() const override { return "cuda"; }

 private:
  cublasHandle_t handle_;
  DeviceBuffer a_, b_, c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MatMul>> CreateCudaMatMul() {
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    return absl::UnavailableError("cublasCreate failed");
  }
  // Disable TF32 so results match f32 on the CPU within rounding.
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  return std::unique_ptr<MatMul>(new CudaMatMul(handle));
}

}  // namespace athanor
