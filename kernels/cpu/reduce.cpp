// The public entry points of reduce.hpp and the choice of kernel table (dispatch.hpp).
//
// The table is chosen once, on first use, and read with one relaxed atomic load per call:
// AVX-512 when the CPU supports AVX-512F/BW/VL/DQ, the portable loops otherwise or when the
// environment says KOLO_KERNELS=portable (KOLO_KERNELS=avx512 insists on AVX-512).
//
// Semantics: integers wrap around; floating min/max propagate NaN and order -0 below +0;
// float16/bfloat16 are reduced in float32 and rounded to nearest-even (element_ops.hpp).
// finalize() is in finalize.cpp, which documents its rounding: avg divides (integers
// truncate), premul_sum multiplies (integers: in double, truncated toward zero, saturated).
#include <atomic>
#include <cstdlib>
#include <string>
#include "common/config.hpp"
#include "kernels/cpu/dispatch.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels {
namespace detail {

bool cpu_has_avx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

KernelPath kernel_path_from_env() {
  const std::string name = config::get_string("KOLO_KERNELS");
  if (name.empty() || name == "auto") return KernelPath::automatic;
  if (name == "portable") return KernelPath::portable;
  if (name == "avx512") return KernelPath::avx512;
  throw InvalidArgument("KOLO_KERNELS='" + name + "': expected auto, portable or avx512");
}

namespace {

const KernelTable& table_for(KernelPath path) {
  if (path == KernelPath::automatic) path = kernel_path_from_env();
  switch (path) {
    case KernelPath::portable:
      return portable_table();
    case KernelPath::avx512:
      if (!cpu_has_avx512()) {
        throw InvalidArgument("AVX-512 kernels requested, but this CPU lacks AVX-512F/BW/VL/DQ");
      }
      return avx512_table();
    case KernelPath::automatic:
      break;  // neither the caller nor the environment chose: the CPU decides
  }
  return cpu_has_avx512() ? avx512_table() : portable_table();
}

std::atomic<const KernelTable*>& active_slot() {
  // Initialised on first use; if KOLO_KERNELS is invalid the exception reaches the caller and
  // the next call tries again.
  static std::atomic<const KernelTable*> slot{&table_for(KernelPath::automatic)};
  return slot;
}

BinaryKernel lookup(DataType t, ReduceKind op, const char* caller) {
  const auto type_index = static_cast<unsigned>(t);
  const auto op_index = static_cast<unsigned>(op);
  if (type_index >= kNumDataTypes) {
    throw InvalidArgument(std::string(caller) + ": unknown data type " + std::to_string(type_index));
  }
  if (op_index >= kNumReduceKinds) {
    throw InvalidArgument(std::string(caller) + ": unknown reduce op " + std::to_string(op_index));
  }
  BinaryKernel kernel = active_table().binary[type_index][op_index];
  if (kernel == nullptr) {
    throw InvalidArgument(std::string(caller) + ": bitwise op '" + reduce_name(op) +
                          "' is not defined for " + dtype_name(t));
  }
  return kernel;
}

}  // namespace

namespace {
std::atomic<size_t> streaming_threshold{kDefaultStreamingStoreThresholdBytes};
}  // namespace

size_t streaming_store_threshold() { return streaming_threshold.load(std::memory_order_relaxed); }

void set_streaming_store_threshold(size_t bytes) {
  streaming_threshold.store(bytes == 0 ? kDefaultStreamingStoreThresholdBytes : bytes, std::memory_order_relaxed);
}

void select_kernel_path(KernelPath path) {
  active_slot().store(&table_for(path), std::memory_order_relaxed);
}

const KernelTable& active_table() { return *active_slot().load(std::memory_order_relaxed); }

}  // namespace detail

void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count) {
  detail::BinaryKernel kernel = detail::lookup(t, op, "reduce_inplace");
  if (count == 0) return;
  if (dst == nullptr || src == nullptr) throw InvalidArgument("reduce_inplace: null buffer");
  kernel(dst, dst, src, count);
}

void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count) {
  detail::BinaryKernel kernel = detail::lookup(t, op, "reduce");
  if (count == 0) return;
  if (dst == nullptr || a == nullptr || b == nullptr) throw InvalidArgument("reduce: null buffer");
  kernel(dst, a, b, count);
}

bool using_avx512() { return &detail::active_table() != &detail::portable_table(); }

void float_to_half(const float* src, uint16_t* dst, size_t count) { detail::active_table().float_to_half(src, dst, count); }
void half_to_float(const uint16_t* src, float* dst, size_t count) { detail::active_table().half_to_float(src, dst, count); }
void float_to_bfloat16(const float* src, uint16_t* dst, size_t count) {
  detail::active_table().float_to_bfloat16(src, dst, count);
}
void bfloat16_to_float(const uint16_t* src, float* dst, size_t count) {
  detail::active_table().bfloat16_to_float(src, dst, count);
}

}  // namespace kolo::kernels
