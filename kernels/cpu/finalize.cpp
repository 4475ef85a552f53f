// finalize(): the scaling step of avg and premul_sum, applied once to a fully reduced result.
//
//  avg         integer types: truncating integer division by nranks (the sum has already
//              wrapped around if it overflowed); float32/float16/bfloat16: x / float(nranks)
//              in float32; float64: x / double(nranks). A division rather than a multiply by
//              1/nranks, so results equal a reference that divides.
//  premul_sum  float64: x * factor in double; float32/float16/bfloat16: x * float(factor) in
//              float32. Integer types: double(x) * factor, truncated toward zero, saturated
//              to the type's range (NaN gives 0). int64/uint64 values beyond 2^53 lose
//              precision in that double.
//  others      nothing to do.
// float16/bfloat16 are widened and narrowed in blocks with the active table's converters.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include "kernels/cpu/dispatch.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels {
namespace {

template <class T>
void divide_integers(void* data, size_t count, int nranks) {
  auto* values = static_cast<T*>(data);
  // Divide in a 64-bit type of the same signedness: nranks may not fit in T (e.g. int8).
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const Wide divisor = static_cast<Wide>(nranks);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(static_cast<Wide>(values[i]) / divisor);
}

template <class T>
T scale_integer(T value, double factor) {
  const double scaled = std::trunc(static_cast<double>(value) * factor);
  if (std::isnan(scaled)) return 0;
  // The bounds are powers of two (or zero), exact in double, so the comparisons are exact.
  if (scaled <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (scaled >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(scaled);
}

template <class T>
void multiply_integers(void* data, size_t count, double factor) {
  auto* values = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) values[i] = scale_integer(values[i], factor);
}

template <class F>
void divide_floats(void* data, size_t count, F divisor) {
  auto* values = static_cast<F*>(data);
  for (size_t i = 0; i < count; ++i) values[i] = values[i] / divisor;
}

template <class F>
void multiply_floats(void* data, size_t count, F factor) {
  auto* values = static_cast<F*>(data);
  for (size_t i = 0; i < count; ++i) values[i] = values[i] * factor;
}

// Widens a block of 16-bit floats, scales it in float32 (divide or multiply), narrows back.
void scale_16bit(DataType t, void* data, size_t count, float operand, bool divide) {
  const detail::KernelTable& table = detail::active_table();
  const bool half = t == DataType::float16;
  auto* values = static_cast<uint16_t*>(data);
  constexpr size_t kBlock = 1024;
  float block[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = count - start < kBlock ? count - start : kBlock;
    (half ? table.half_to_float : table.bfloat16_to_float)(values + start, block, n);
    if (divide) {
      divide_floats<float>(block, n, operand);
    } else {
      multiply_floats<float>(block, n, operand);
    }
    (half ? table.float_to_half : table.float_to_bfloat16)(block, values + start, n);
  }
}

void finalize_avg(DataType t, void* data, size_t count, int nranks) {
  if (nranks <= 0) throw InvalidArgument("finalize(avg): nranks must be positive, got " + std::to_string(nranks));
  switch (t) {
    case DataType::int8: return divide_integers<int8_t>(data, count, nranks);
    case DataType::uint8: return divide_integers<uint8_t>(data, count, nranks);
    case DataType::int32: return divide_integers<int32_t>(data, count, nranks);
    case DataType::uint32: return divide_integers<uint32_t>(data, count, nranks);
    case DataType::int64: return divide_integers<int64_t>(data, count, nranks);
    case DataType::uint64: return divide_integers<uint64_t>(data, count, nranks);
    case DataType::float16:
    case DataType::bfloat16: return scale_16bit(t, data, count, static_cast<float>(nranks), true);
    case DataType::float32: return divide_floats<float>(data, count, static_cast<float>(nranks));
    case DataType::float64: return divide_floats<double>(data, count, static_cast<double>(nranks));
  }
  throw InvalidArgument("finalize: unknown data type " + std::to_string(static_cast<int>(t)));
}

void finalize_premul_sum(DataType t, void* data, size_t count, double factor) {
  switch (t) {
    case DataType::int8: return multiply_integers<int8_t>(data, count, factor);
    case DataType::uint8: return multiply_integers<uint8_t>(data, count, factor);
    case DataType::int32: return multiply_integers<int32_t>(data, count, factor);
    case DataType::uint32: return multiply_integers<uint32_t>(data, count, factor);
    case DataType::int64: return multiply_integers<int64_t>(data, count, factor);
    case DataType::uint64: return multiply_integers<uint64_t>(data, count, factor);
    case DataType::float16:
    case DataType::bfloat16: return scale_16bit(t, data, count, static_cast<float>(factor), false);
    case DataType::float32: return multiply_floats<float>(data, count, static_cast<float>(factor));
    case DataType::float64: return multiply_floats<double>(data, count, factor);
  }
  throw InvalidArgument("finalize: unknown data type " + std::to_string(static_cast<int>(t)));
}

}  // namespace

void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks) {
  if (op.kind != ReduceKind::avg && op.kind != ReduceKind::premul_sum) {
    if (static_cast<unsigned>(op.kind) >= kNumReduceKinds) {
      throw InvalidArgument("finalize: unknown reduce op " + std::to_string(static_cast<int>(op.kind)));
    }
    return;
  }
  if (count != 0 && data == nullptr) throw InvalidArgument("finalize: null buffer");
  if (op.kind == ReduceKind::avg) {
    finalize_avg(t, data, count, nranks);
  } else {
    finalize_premul_sum(t, data, count, op.factor);
  }
}

}  // namespace kolo::kernels
