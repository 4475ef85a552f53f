// Shared pieces of the kernel tests: running a test under each kernel implementation,
// guarded aligned buffers, random inputs per dtype, and reading elements as numbers.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include "kernels/cpu/dispatch.hpp"
#include "kolo/types.hpp"
#include "tests/kernels/reference.hpp"

namespace kolo::test {

using kernels::detail::KernelPath;

inline const char* path_name(KernelPath p) {
  switch (p) {
    case KernelPath::portable: return "portable";
    case KernelPath::avx512: return "avx512";
    case KernelPath::automatic: return "automatic";
  }
  return "?";
}

// Selects a kernel implementation for the duration of a test and restores the default after.
// The AVX-512 variant is skipped (not failed) on a CPU without AVX-512.
class KernelPathScope {
 public:
  explicit KernelPathScope(KernelPath p) { kernels::detail::select_kernel_path(p); }
  ~KernelPathScope() { kernels::detail::select_kernel_path(KernelPath::automatic); }
  KernelPathScope(const KernelPathScope&) = delete;
  KernelPathScope& operator=(const KernelPathScope&) = delete;
};

inline bool path_available(KernelPath p) {
  return p != KernelPath::avx512 || kernels::detail::cpu_has_avx512();
}

#define KOLO_SKIP_IF_PATH_UNAVAILABLE(path)                                   \
  if (!::kolo::test::path_available(path)) {                                  \
    GTEST_SKIP() << "this CPU has no AVX-512F/BW/VL/DQ; AVX-512 path untested"; \
  }

// A 64-byte aligned byte buffer with guard bytes on both sides of the region handed out, so
// a kernel writing outside [offset, offset + bytes) is caught.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 128;
  static constexpr unsigned char kGuardByte = 0xA5;

  // `offset` bytes past a 64-byte boundary.
  GuardedBuffer(size_t bytes, size_t offset) : bytes_(bytes), offset_(offset) {
    total_ = kGuard + offset + bytes + kGuard;
    const size_t rounded = (total_ + 63) / 64 * 64;
    storage_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
    std::memset(storage_.get(), kGuardByte, rounded);
  }
  unsigned char* data() { return storage_.get() + kGuard + offset_; }
  size_t bytes() const { return bytes_; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard + offset_; ++i) {
      if (storage_[i] != kGuardByte) return false;
    }
    for (size_t i = kGuard + offset_ + bytes_; i < total_; ++i) {
      if (storage_[i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  size_t bytes_, offset_, total_;
  std::unique_ptr<unsigned char[], Free> storage_;
};

// Reads/writes element i of a raw buffer as a little-endian unsigned bit pattern.
inline uint64_t load_bits(const void* data, size_t size, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * size, size);
  return v;
}
inline void store_bits(void* data, size_t size, size_t i, uint64_t v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * size, &v, size);
}

inline int bit_width_of(DataType t) { return static_cast<int>(dtype_size(t)) * 8; }
inline bool is_signed_integer(DataType t) {
  return t == DataType::int8 || t == DataType::int32 || t == DataType::int64;
}

// Integer element as an exact (sign- or zero-extended) value.
inline __int128 integer_value(DataType t, uint64_t bits) {
  return wrap_integer(static_cast<__int128>(bits), bit_width_of(t), is_signed_integer(t));
}

// Floating element as a double (exact for every format but never used for float64 maths).
inline double float_value(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::float16: return decode_small_float(static_cast<uint32_t>(bits), kHalfFormat);
    case DataType::bfloat16: return decode_small_float(static_cast<uint32_t>(bits), kBFloat16Format);
    case DataType::float32: {
      float f;
      const auto b32 = static_cast<uint32_t>(bits);
      std::memcpy(&f, &b32, 4);
      return f;
    }
    case DataType::float64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    default: ADD_FAILURE() << "float_value on integer type"; return 0;
  }
}

// Random element bits: for floats half the draws are arbitrary bit patterns (NaN, inf,
// subnormals, huge and tiny values), half are values of similar magnitude (|x| in [0.25, 4))
// whose sums and products need real rounding.
inline uint64_t random_bits(DataType t, std::mt19937_64& rng) {
  const uint64_t raw = rng();
  const int bits = bit_width_of(t);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (!is_floating(t) || (rng() & 1)) return raw & mask;
  std::uniform_real_distribution<double> magnitude(0.25, 4.0);
  const double x = (rng() & 1 ? -1.0 : 1.0) * magnitude(rng);
  switch (t) {
    case DataType::float16: return encode_small_float(x, kHalfFormat);
    case DataType::bfloat16: return encode_small_float(x, kBFloat16Format);
    case DataType::float32: {
      const float f = static_cast<float>(x);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, &x, 8);
      return b;
    }
  }
}

inline std::vector<DataType> all_dtypes() {
  std::vector<DataType> v;
  for (int i = 0; i < kNumDataTypes; ++i) v.push_back(static_cast<DataType>(i));
  return v;
}

}  // namespace kolo::test
