// Reduction and finalize kernels for the integer types: int8, uint8, int32, uint32, int64,
// uint64. Every op applies (bitwise ones included); avg and premul_sum reduce as sum.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include "kernels/cuda/element_ops.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels::cuda::detail {
namespace {

// Wrapping sum and product and the bitwise ops give the same bits for a signed type and its
// unsigned twin (two's complement), so signed types use the unsigned kernels: only min and max
// need their own. That is 54 kernels instead of 84, and nvcc time is per kernel.
template <class T>
void reduce_type(ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  using U = std::make_unsigned_t<T>;
  constexpr const char* kWhat = "cuda integer reduce";
  switch (op) {
    case ReduceKind::sum:
    case ReduceKind::avg:
    case ReduceKind::premul_sum: return launch_reduce<U, IntSum<U>>(targets, count, stream, kWhat);
    case ReduceKind::prod: return launch_reduce<U, IntProd<U>>(targets, count, stream, kWhat);
    case ReduceKind::min: return launch_reduce<T, IntMin<T>>(targets, count, stream, kWhat);
    case ReduceKind::max: return launch_reduce<T, IntMax<T>>(targets, count, stream, kWhat);
    case ReduceKind::band: return launch_reduce<U, BitAnd<U>>(targets, count, stream, kWhat);
    case ReduceKind::bor: return launch_reduce<U, BitOr<U>>(targets, count, stream, kWhat);
    case ReduceKind::bxor: return launch_reduce<U, BitXor<U>>(targets, count, stream, kWhat);
  }
  throw InvalidArgument("cuda integer reduce: unknown reduce op " + std::to_string(static_cast<int>(op)));
}

template <class T>
void finalize_type(const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream) {
  if (op.kind == ReduceKind::avg) {
    using Divide = IntDivide<T>;
    return launch_map<T>(data, Divide{static_cast<typename Divide::Wide>(nranks)}, count, stream,
                         "cuda finalize(avg)");
  }
  const IntScale<T> scale{op.factor, static_cast<double>(std::numeric_limits<T>::min()),
                          static_cast<double>(std::numeric_limits<T>::max()), std::numeric_limits<T>::min(),
                          std::numeric_limits<T>::max()};
  launch_map<T>(data, scale, count, stream, "cuda finalize(premul_sum)");
}

}  // namespace

void launch_integer_reduce(DataType t, ReduceKind op, const ReduceTargets& targets, size_t count, cudaStream_t stream) {
  switch (t) {
    case DataType::int8: return reduce_type<int8_t>(op, targets, count, stream);
    case DataType::uint8: return reduce_type<uint8_t>(op, targets, count, stream);
    case DataType::int32: return reduce_type<int32_t>(op, targets, count, stream);
    case DataType::uint32: return reduce_type<uint32_t>(op, targets, count, stream);
    case DataType::int64: return reduce_type<int64_t>(op, targets, count, stream);
    case DataType::uint64: return reduce_type<uint64_t>(op, targets, count, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda integer reduce: not an integer type: ") + dtype_name(t));
}

void launch_integer_finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks,
                             cudaStream_t stream) {
  switch (t) {
    case DataType::int8: return finalize_type<int8_t>(op, data, count, nranks, stream);
    case DataType::uint8: return finalize_type<uint8_t>(op, data, count, nranks, stream);
    case DataType::int32: return finalize_type<int32_t>(op, data, count, nranks, stream);
    case DataType::uint32: return finalize_type<uint32_t>(op, data, count, nranks, stream);
    case DataType::int64: return finalize_type<int64_t>(op, data, count, nranks, stream);
    case DataType::uint64: return finalize_type<uint64_t>(op, data, count, nranks, stream);
    default: break;
  }
  throw InvalidArgument(std::string("cuda integer finalize: not an integer type: ") + dtype_name(t));
}

}  // namespace kolo::kernels::cuda::detail
