#include "worker/model/matmul.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"

namespace athanor {

#ifdef ATHANOR_HAVE_CUDA
// In cuda_matmul.cc.
absl::StatusOr<std::unique_ptr<MatMul>> CreateCudaMatMul();
bool CudaDevicePresent(std::string* why_not);
#endif

namespace {

class CpuMatMul final : public MatMul {
 public:
  CpuMatMul() { openblas_set_num_threads(1); }  // fixed summation order
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  std::string device() const override { return "cpu"; }
};

}  // namespace

bool CudaMatMulAvailable(std::string* why_not) {
#ifdef ATHANOR_HAVE_CUDA
  return CudaDevicePresent(why_not);
#else
  *why_not = "this build has no CUDA (ATHANOR_HAVE_CUDA is off)";
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<MatMul>> CreateMatMul(const std::string& device) {
  if (device == "cpu") return std::unique_ptr<MatMul>(new CpuMatMul());
  if (device == "cuda") {
    std::string why;
    if (!CudaMatMulAvailable(&why)) return absl::UnavailableError(absl::StrCat("cuda: ", why));
#ifdef ATHANOR_HAVE_CUDA
    return CreateCudaMatMul();
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", device, "' (expected cpu or cuda)"));
}

}  // namespace athanor
