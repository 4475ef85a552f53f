// Shared pieces of the CUDA kernel tests: skipping without a device, a seed printed once and
// reproducible (KOLO_TEST_SEED), guarded device buffers, bounded waits on a stream, random
// inputs per dtype, and element-wise comparison with a tolerance in units in the last place.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "kernels/cuda/cuda_api.hpp"
#include "kolo/types.hpp"

namespace kolo::test::cuda {

// Every device test starts with this: without a GPU (or a driver) the test is skipped, and
// says why, rather than failing.
#define KOLO_SKIP_WITHOUT_CUDA()                                                   \
  if (!::kolo::kernels::cuda_available()) {                                         \
    GTEST_SKIP() << "no CUDA device: " << ::kolo::kernels::cuda_probe().error;      \
  }

// Throws std::runtime_error naming the call unless status is cudaSuccess.
inline void cuda_check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(status));
}

// The process-wide seed: KOLO_TEST_SEED if set, else fresh; printed once so a failure can be
// replayed.
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* fixed = std::getenv("KOLO_TEST_SEED");
    const uint64_t s = fixed != nullptr ? std::strtoull(fixed, nullptr, 10)
                                        : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("[cuda-test] seed %llu (replay with KOLO_TEST_SEED=%llu)\n", static_cast<unsigned long long>(s),
                static_cast<unsigned long long>(s));
    std::fflush(stdout);
    return s;
  }();
  return seed;
}

// A generator per test, derived from the seed and the test's name (independent of test order).
inline std::mt19937_64 test_rng() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  return std::mt19937_64(test_seed() ^ std::hash<std::string>{}(name));
}

// Waits for everything queued on `stream`, at most `timeout` (a hung kernel fails the test
// instead of hanging it). A kernel fault is reported here.
inline void wait_for(cudaStream_t stream, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) cuda_check(status, "cudaStreamQuery");
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("stream did not finish within " + std::to_string(timeout.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A stream owned by a test.
class Stream {
 public:
  Stream() { cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void* opaque() const { return static_cast<void*>(stream_); }

 private:
  cudaStream_t stream_ = nullptr;
};

// Device memory with kGuard poisoned bytes on both sides of the region handed out (which
// starts `offset` bytes past a 256-byte boundary), so writes outside it are caught.
class DeviceBuffer {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPoison = 0xA5;

  DeviceBuffer(size_t bytes, size_t offset) : bytes_(bytes), offset_(offset), total_(kGuard + offset + bytes + kGuard) {
    cuda_check(cudaMalloc(&base_, total_), "cudaMalloc(" + std::to_string(total_) + ")");
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return static_cast<unsigned char*>(base_) + kGuard + offset_; }
  size_t bytes() const { return bytes_; }
  // Fills the whole allocation (guards and data) with kPoison.
  void poison(cudaStream_t s) { cuda_check(cudaMemsetAsync(base_, kPoison, total_, s), "cudaMemsetAsync"); }
  // Poisons the guards and fills the data region with `host` (bytes() bytes).
  void upload(const void* host, cudaStream_t s) {
    poison(s);
    cuda_check(cudaMemcpyAsync(data(), host, bytes_, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync(H2D)");
    wait_for(s);  // `host` may be a temporary
  }
  // Copies the data region back; call after wait_for().
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes_);
    if (bytes_ != 0) cuda_check(cudaMemcpy(host.data(), data(), bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy(D2H)");
    return host;
  }
  // Whether every guard byte still holds kPoison; call after wait_for().
  bool guards_intact() const {
    // Only the guard bytes cross the bus (the data region can be tens of MiB).
    const size_t front = kGuard + offset_;
    std::vector<unsigned char> guards(front + kGuard);
    cuda_check(cudaMemcpy(guards.data(), base_, front, cudaMemcpyDeviceToHost), "cudaMemcpy(D2H)");
    cuda_check(cudaMemcpy(guards.data() + front, static_cast<unsigned char*>(base_) + front + bytes_, kGuard,
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy(D2H)");
    for (unsigned char byte : guards) {
      if (byte != kPoison) return false;
    }
    return true;
  }

 private:
  void* base_ = nullptr;
  size_t bytes_, offset_, total_;
};

// ---- host-side elements, as bit patterns -------------------------------------------------

inline bool is_integer_type(DataType t) { return !is_floating(t); }
inline int bits_of(DataType t) { return static_cast<int>(dtype_size(t) * 8); }
inline bool is_signed_type(DataType t) {
  return t == DataType::int8 || t == DataType::int32 || t == DataType::int64;
}

inline uint64_t element_bits(const std::vector<unsigned char>& bytes, DataType t, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + i * dtype_size(t), dtype_size(t));  // little-endian host
  return v;
}
inline void set_element_bits(std::vector<unsigned char>& bytes, DataType t, size_t i, uint64_t v) {
  std::memcpy(bytes.data() + i * dtype_size(t), &v, dtype_size(t));
}

// Runs fn(begin, end) over [0, count) in fixed chunks of kChunk elements, spread over the
// host's cores: the reference of a 2^20-element case for every dtype x op would otherwise
// dominate the test's run time. Chunk boundaries do not depend on the number of threads.
constexpr size_t kChunk = size_t{1} << 16;
template <class Fn>
void parallel_chunks(size_t count, Fn fn) {
  const size_t chunks = (count + kChunk - 1) / kChunk;
  const size_t workers = std::min<size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  if (workers <= 1) {
    for (size_t c = 0; c < chunks; ++c) fn(c * kChunk, std::min(count, (c + 1) * kChunk));
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t c = next++; c < chunks; c = next++) fn(c * kChunk, std::min(count, (c + 1) * kChunk));
    });
  }
  for (std::thread& t : threads) t.join();
}

// A small fast generator for bulk inputs (one per chunk, seeded from the test's generator).
struct SplitMix64 {
  uint64_t state;
  uint64_t operator()() {
    uint64_t z = (state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }
};

// Random elements: integers over their whole range; float16/bfloat16 as uniform bit patterns
// (every magnitude, subnormals, infinities and NaNs); float32/float64 with exponents of
// moderate size plus, one time in 32, a special value (NaN, +-inf, +-0, a subnormal, the
// largest finite), so min/max meet signed zeros and NaNs and prod meets overflow.
template <class Rng>
uint64_t random_element(DataType t, Rng& rng) {
  const uint64_t r = rng();
  switch (t) {
    case DataType::float32: {
      if (rng() % 32 == 0) {
        constexpr uint32_t kSpecials[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x00000000u,
                                          0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu};
        return kSpecials[r % 8];
      }
      const uint32_t sign = static_cast<uint32_t>(r >> 63) << 31;
      const uint32_t exponent = 127 - 20 + static_cast<uint32_t>((r >> 32) % 41);
      return sign | (exponent << 23) | static_cast<uint32_t>(r & 0x7FFFFFu);
    }
    case DataType::float64: {
      if (rng() % 32 == 0) {
        constexpr uint64_t kSpecials[] = {0x7FF8000000000000u, 0x7FF0000000000000u, 0xFFF0000000000000u,
                                          0x0000000000000000u, 0x8000000000000000u, 0x0000000000000001u,
                                          0x800FFFFFFFFFFFFFu, 0x7FEFFFFFFFFFFFFFu};
        return kSpecials[r % 8];
      }
      const uint64_t sign = (r >> 63) << 63;
      const uint64_t exponent = 1023 - 40 + (rng() % 81);
      return sign | (exponent << 52) | (r & 0xFFFFFFFFFFFFFu);
    }
    default: {
      const int bits = bits_of(t);
      return bits == 64 ? r : r & ((uint64_t{1} << bits) - 1);
    }
  }
}

inline std::vector<unsigned char> random_elements(DataType t, size_t count, std::mt19937_64& rng) {
  std::vector<unsigned char> bytes(count * dtype_size(t));
  std::vector<uint64_t> chunk_seeds((count + kChunk - 1) / kChunk);
  for (uint64_t& seed : chunk_seeds) seed = rng();
  parallel_chunks(count, [&](size_t begin, size_t end) {
    SplitMix64 chunk_rng{chunk_seeds[begin / kChunk]};
    for (size_t i = begin; i < end; ++i) set_element_bits(bytes, t, i, random_element(t, chunk_rng));
  });
  return bytes;
}

// What an element must be: exactly `bits`, or any NaN, or within `ulps` of `bits` (ordered
// by value, so the neighbours of a float are one ulp away; -0 and +0 are one ulp apart).
struct Expected {
  uint64_t bits = 0;
  bool nan = false;
  int ulps = 0;
};

inline bool is_nan_bits(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::float16: return (bits & 0x7C00u) == 0x7C00u && (bits & 0x3FFu) != 0;
    case DataType::bfloat16: return (bits & 0x7F80u) == 0x7F80u && (bits & 0x7Fu) != 0;
    case DataType::float32: return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0;
    case DataType::float64:
      return (bits & 0x7FF0000000000000u) == 0x7FF0000000000000u && (bits & 0xFFFFFFFFFFFFFu) != 0;
    default: return false;
  }
}

// A float's bit pattern mapped to an integer that increases with its value.
inline int64_t ordered(DataType t, uint64_t bits) {
  const int width = bits_of(t);
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign - 1);
  return (bits & sign) != 0 ? -static_cast<int64_t>(magnitude) - 1 : static_cast<int64_t>(magnitude);
}

inline bool matches(DataType t, const Expected& e, uint64_t got) {
  if (e.nan) return is_nan_bits(t, got);
  if (got == e.bits) return true;
  if (e.ulps == 0 || is_nan_bits(t, got)) return false;
  const int64_t distance = ordered(t, got) - ordered(t, e.bits);
  return distance <= e.ulps && -distance <= e.ulps;
}

inline std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Compares `got` (count elements) with expected(i); reports the first few mismatches and the
// total, naming each element's inputs through describe(i).
template <class ExpectedFn, class DescribeFn>
::testing::AssertionResult all_match(DataType t, const std::vector<unsigned char>& got, size_t count,
                                     ExpectedFn expected, DescribeFn describe) {
  size_t mismatches = 0;
  std::ostringstream report;
  for (size_t i = 0; i < count; ++i) {
    const Expected e = expected(i);
    const uint64_t g = element_bits(got, t, i);
    if (matches(t, e, g)) continue;
    if (++mismatches <= 5) {
      report << "\n  [" << i << "] " << describe(i) << ": got " << hex(g) << ", expected "
             << (e.nan ? std::string("NaN") : hex(e.bits)) << (e.ulps != 0 ? " +-" + std::to_string(e.ulps) + " ulp" : "");
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " of " << count << " " << dtype_name(t)
                                       << " elements wrong:" << report.str();
}

}  // namespace kolo::test::cuda
