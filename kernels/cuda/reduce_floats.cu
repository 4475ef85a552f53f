// Reduction and finalize kernels for float32 and float64 (sum, prod, min, max; avg and
// premul_sum reduce as sum). Bitwise ops were refused by the dispatcher.
#include <string>
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels::cuda::detail {
namespace {

template <class F>
void reduce_type(ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  constexpr const char* kWhat = "cuda float reduce";
  switch (op) {
    case ReduceKind::sum:
    case ReduceKind::avg:
    case ReduceKind::premul_sum: return launch_reduce<F, FloatSum<F>>(targets, count, stream, kWhat);
    case ReduceKind::prod: return launch_reduce<F, FloatProd<F>>(targets, count, stream, kWhat);
    case ReduceKind::min: return launch_reduce<F, FloatMin<F>>(targets, count, stream, kWhat);
    case ReduceKind::max: return launch_reduce<F, FloatMax<F>>(targets, count, stream, kWhat);
    default: break;
  }
  throw InvalidArgument(std::string("cuda float reduce: op '") + reduce_name(op) + "' is not defined for floats");
}

template <class F>
void finalize_type(const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream) {
  if (op.kind == ReduceKind::avg) {
    return launch_map<F>(data, FloatDivide<F>{static_cast<F>(nranks)}, count, stream, "cuda finalize(avg)");
  }
  launch_map<F>(data, FloatScale<F>{static_cast<F>(op.factor)}, count, stream, "cuda finalize(premul_sum)");
}

}  // namespace

void launch_float_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  switch (t) {
    case DataType::float32: return reduce_type<float>(op, targets, count, stream);
    case DataType::float64: return reduce_type<double>(op, targets, count, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda float reduce: not float32/float64: ") + dtype_name(t));
}

void launch_float_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks,
                           cudaStream_t stream) {
  switch (t) {
    case DataType::float32: return finalize_type<float>(op, data, count, nranks, stream);
    case DataType::float64: return finalize_type<double>(op, data, count, nranks, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda float finalize: not float32/float64: ") + dtype_name(t));
}

}  // namespace kolo::kernels::cuda::detail
