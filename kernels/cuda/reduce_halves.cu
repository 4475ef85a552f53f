// Reduction and finalize kernels for the 16-bit float formats, float16 (__half) and bfloat16
// (__nv_bfloat16): each element is widened to float32, reduced or scaled there, and rounded
// back to nearest-even, as the CPU kernels do.
#include <string>
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels::cuda::detail {
namespace {

template <class Format>
void reduce_format(ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  using S = typename Format::Storage;
  constexpr const char* kWhat = "cuda 16-bit float reduce";
  switch (op) {
    case ReduceKind::sum:
    case ReduceKind::avg:
    case ReduceKind::premul_sum:
      return launch_reduce<S, Widened<Format, FloatSum<float>>>(targets, count, stream, kWhat);
    case ReduceKind::prod: return launch_reduce<S, Widened<Format, FloatProd<float>>>(targets, count, stream, kWhat);
    case ReduceKind::min: return launch_reduce<S, Widened<Format, FloatMin<float>>>(targets, count, stream, kWhat);
    case ReduceKind::max: return launch_reduce<S, Widened<Format, FloatMax<float>>>(targets, count, stream, kWhat);
    default: break;
  }
  throw InvalidArgument(std::string("cuda 16-bit float reduce: op '") + reduce_name(op) +
                        "' is not defined for floats");
}

template <class Format>
void finalize_format(const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream) {
  using S = typename Format::Storage;
  if (op.kind == ReduceKind::avg) {
    using Divide = Widened<Format, FloatDivide<float>>;
    return launch_map<S>(data, Divide{{static_cast<float>(nranks)}}, count, stream, "cuda finalize(avg)");
  }
  using Scale = Widened<Format, FloatScale<float>>;
  launch_map<S>(data, Scale{{static_cast<float>(op.factor)}}, count, stream, "cuda finalize(premul_sum)");
}

}  // namespace

void launch_half_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  switch (t) {
    case DataType::float16: return reduce_format<HalfFormat>(op, targets, count, stream);
    case DataType::bfloat16: return reduce_format<BFloat16Format>(op, targets, count, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda 16-bit float reduce: not float16/bfloat16: ") + dtype_name(t));
}

void launch_half_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks,
                          cudaStream_t stream) {
  switch (t) {
    case DataType::float16: return finalize_format<HalfFormat>(op, data, count, nranks, stream);
    case DataType::bfloat16: return finalize_format<BFloat16Format>(op, data, count, nranks, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda 16-bit float finalize: not float16/bfloat16: ") + dtype_name(t));
}

}  // namespace kolo::kernels::cuda::detail
