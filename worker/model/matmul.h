// MatMul: the matrix products of the model, behind a small interface so the
// same model code runs on OpenBLAS (CPU) or cuBLAS (GPU).
//
// Gemm has cblas_sgemm's row-major semantics:
//   C[m x n] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T.
// All pointers are host memory; the CUDA implementation stages them through
// device buffers it owns (a correctness path, not a fast one: the model's
// activations stay on the host). Implementations are confined to one thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace athanor {

class MatMul {
 public:
  virtual ~MatMul() = default;
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  virtual std::string device() const = 0;  // "cpu" or "cuda"
};

// "cpu": OpenBLAS, one thread (bitwise reproducible). "cuda": cuBLAS on
// device 0; Unavailable when the build has no CUDA or no GPU is present,
// InvalidArgument for other names.
absl::StatusOr<std::unique_ptr<MatMul>> CreateMatMul(const std::string& device);

// True when this build has the CUDA path and a GPU is visible.
bool CudaMatMulAvailable(std::string* why_not);

}  // namespace athanor
