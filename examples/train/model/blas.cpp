#include "blas.hpp"

#include <cblas.h>

#include <atomic>
#include <stdexcept>

namespace kolo::gpt {
namespace {

// Set once anyone (the user or the default) has chosen a thread count.
std::atomic<bool> threads_chosen{false};

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void set_blas_threads(int threads) {
  if (threads < 1) throw std::invalid_argument("set_blas_threads: need at least 1 thread");
  openblas_set_num_threads(threads);
  threads_chosen = true;
}

int blas_threads() { return openblas_get_num_threads(); }

void apply_default_blas_threads() {
  bool expected = false;
  if (threads_chosen.compare_exchange_strong(expected, true)) openblas_set_num_threads(1);
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace kolo::gpt
