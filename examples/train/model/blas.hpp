// The one place the model talks to OpenBLAS: a row-major GEMM for float and double, and the
// thread count. Every matmul of the model goes through gemm() so that the layer files read as math.
#pragma once

#include <string>

namespace kolo::gpt {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, all row-major; lda/ldb/ldc are the row
// strides of A, B and C as stored (so strided views of a wider matrix need no copy).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
void gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc);

// Threads OpenBLAS may use. A data-parallel trainer runs one process per core, so the model
// sets 1 the first time a Model is built unless set_blas_threads() was called before.
void set_blas_threads(int threads);
int blas_threads();
// Called by Model's constructor: applies the default of 1 thread if nobody chose otherwise.
void apply_default_blas_threads();
// The kernel family OpenBLAS picked for this CPU (openblas_get_corename(), e.g. "SkylakeX").
std::string blas_core_name();

}  // namespace kolo::gpt
