#include "worker/model/matmul.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/rng.h"

namespace athanor {
namespace {

// Naive row-major reference in double.
void Reference(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
               int lda, const std::vector<float>& b, int ldb, float beta, std::vector<float>* c,
               int ldc) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        s += static_cast<double>(ta ? a[p * lda + i] : a[i * lda + p]) *
             (tb ? b[j * ldb + p] : b[p * ldb + j]);
      }
      (*c)[i * ldc + j] = static_cast<float>(alpha * s + beta * (*c)[i * ldc + j]);
    }
  }
}

void CheckAllTransposes(MatMul* mm) {
  SplitMix64 rng(3);
  const int m = 5, n = 7, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = ta ? m : k, ldb = tb ? k : n;
      std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * n), want;
      for (float& x : a) x = rng.NextSymmetric();
      for (float& x : b) x = rng.NextSymmetric();
      for (float& x : c) x = rng.NextSymmetric();
      want = c;
      Reference(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 1.0f, &want, n);
      mm->Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), n);
      for (int i = 0; i < m * n; ++i) {
        ASSERT_NEAR(c[i], want[i], 1e-5) << mm->device() << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(MatMulTest, CpuMatchesReference) {
  auto mm = CreateMatMul("cpu");
  ASSERT_TRUE(mm.ok());
  CheckAllTransposes(mm->get());
}

TEST(MatMulTest, CudaMatchesReference) {
  std::string why;
  if (!CudaMatMulAvailable(&why)) GTEST_SKIP() << "skipping the cuBLAS test: " << why;
  auto mm = CreateMatMul("cuda");
  ASSERT_TRUE(mm.ok()) << mm.status();
  CheckAllTransposes(mm->get());
}

TEST(MatMulTest, UnknownDevice) {
  EXPECT_EQ(CreateMatMul("tpu").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace athanor
