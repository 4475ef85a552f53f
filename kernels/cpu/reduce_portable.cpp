// The portable kernels: element_ops.hpp applied in loops the compiler vectorises for the
// baseline ISA (SSE2 on x86-64). Used on CPUs without AVX-512 and when KOLO_KERNELS=portable.
#include <type_traits>
#include "kernels/cpu/dispatch.hpp"
#include "kernels/cpu/element_ops.hpp"

namespace kolo::kernels::detail {
namespace {

// dst may be the same array as a, b or both (but never partially overlaps them). Each
// aliasing pattern gets its own loop whose pointers are declared __restrict, so the
// vectoriser needs no run-time overlap checks (which would send exact aliasing, the common
// in-place case, down a scalar fallback).
template <class T, class Op>
void distinct_loop(T* __restrict dst, const T* __restrict a, const T* __restrict b, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = Op::apply(a[i], b[i]);
}
template <class T, class Op>
void dst_is_a_loop(T* __restrict dst, const T* __restrict b, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], b[i]);
}
template <class T, class Op>
void dst_is_b_loop(T* __restrict dst, const T* __restrict a, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = Op::apply(a[i], dst[i]);
}
template <class T, class Op>
void all_same_loop(T* __restrict dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], dst[i]);
}

template <class T, class Op>
void binary_kernel(void* dst_void, const void* a_void, const void* b_void, size_t count) {
  auto* dst = static_cast<T*>(dst_void);
  const auto* a = static_cast<const T*>(a_void);
  const auto* b = static_cast<const T*>(b_void);
  if (dst == a && dst == b) return all_same_loop<T, Op>(dst, count);
  if (dst == a) return dst_is_a_loop<T, Op>(dst, b, count);
  if (dst == b) return dst_is_b_loop<T, Op>(dst, a, count);
  // a == b (with a separate dst) is fine here too: __restrict only forbids aliasing an
  // object that is written.
  distinct_loop<T, Op>(dst, a, b, count);
}

void half_to_float_array(const uint16_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = half_bits_to_float(src[i]);
}
void float_to_half_array(const float* src, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = float_to_half_bits(src[i]);
}
void bfloat16_to_float_array(const uint16_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = bfloat16_bits_to_float(src[i]);
}
void float_to_bfloat16_array(const float* src, uint16_t* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = float_to_bfloat16_bits(src[i]);
}

// Fills one dtype's row: arithmetic ops for all types, bitwise ops for integers only.
template <class T>
constexpr void fill_row(BinaryKernel (&row)[kNumReduceKinds]) {
  auto at = [&](ReduceKind k) -> BinaryKernel& { return row[static_cast<int>(k)]; };
  at(ReduceKind::sum) = binary_kernel<T, ops::Sum<T>>;
  at(ReduceKind::avg) = binary_kernel<T, ops::Sum<T>>;
  at(ReduceKind::premul_sum) = binary_kernel<T, ops::Sum<T>>;
  at(ReduceKind::prod) = binary_kernel<T, ops::Prod<T>>;
  at(ReduceKind::min) = binary_kernel<T, ops::Min<T>>;
  at(ReduceKind::max) = binary_kernel<T, ops::Max<T>>;
  if constexpr (std::is_integral_v<T>) {
    at(ReduceKind::band) = binary_kernel<T, ops::BitAnd<T>>;
    at(ReduceKind::bor) = binary_kernel<T, ops::BitOr<T>>;
    at(ReduceKind::bxor) = binary_kernel<T, ops::BitXor<T>>;
  }
}

constexpr KernelTable make_portable_table() {
  KernelTable table{};
  table.name = "portable";
  auto row = [&](DataType t) -> BinaryKernel(&)[kNumReduceKinds] { return table.binary[static_cast<int>(t)]; };
  fill_row<int8_t>(row(DataType::int8));
  fill_row<uint8_t>(row(DataType::uint8));
  fill_row<int32_t>(row(DataType::int32));
  fill_row<uint32_t>(row(DataType::uint32));
  fill_row<int64_t>(row(DataType::int64));
  fill_row<uint64_t>(row(DataType::uint64));
  fill_row<ops::Half>(row(DataType::float16));
  fill_row<ops::BFloat16>(row(DataType::bfloat16));
  fill_row<float>(row(DataType::float32));
  fill_row<double>(row(DataType::float64));
  table.half_to_float = half_to_float_array;
  table.float_to_half = float_to_half_array;
  table.bfloat16_to_float = bfloat16_to_float_array;
  table.float_to_bfloat16 = float_to_bfloat16_array;
  return table;
}

constexpr KernelTable kPortableTable = make_portable_table();

}  // namespace

const KernelTable& portable_table() { return kPortableTable; }

}  // namespace kolo::kernels::detail
