// Throughput of the CPU reduction kernels against memcpy of the same size, for every dtype
// (sum) and every other operator (prod, min, max on float32; band, bor, bxor on int32),
// 4 KiB .. 64 MiB per operand buffer. The GB/s counter counts bytes read + written
// (10^9 bytes per second): reduce reads a and b and writes dst (3x the buffer size), as does
// reduce_inplace (reads dst and src, writes dst); memcpy reads and writes once (2x).
// Set KOLO_KERNELS=portable to measure the portable loops instead of AVX-512.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include "kernels/cpu/reduce.hpp"
#include "kolo/types.hpp"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

// Page-aligned and filled with a repeating byte pattern, pages faulted in before timing. Every
// byte is in 0x40..0x7F, so the top byte of every float is too: float32/float64/bfloat16
// elements are normal numbers of magnitude >= 2 (never denormal, whose multiplications take
// microcode assists and made prod look 20x slower than it is), float16 ones normal or inf.
Buffer make_buffer(size_t bytes, unsigned char seed) {
  Buffer b(static_cast<unsigned char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
  for (size_t i = 0; i < bytes; ++i) b.get()[i] = static_cast<unsigned char>(((i * 7 + seed) & 0x3F) | 0x40);
  return b;
}

void set_rate(benchmark::State& state, size_t bytes_per_iteration) {
  const double total = static_cast<double>(bytes_per_iteration) * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(total));
}

void BM_reduce(benchmark::State& state, kolo::DataType t) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / kolo::dtype_size(t);
  Buffer a = make_buffer(bytes, 1), b = make_buffer(bytes, 2), dst = make_buffer(bytes, 3);
  for (auto _ : state) {
    kolo::kernels::reduce(t, kolo::ReduceKind::sum, dst.get(), a.get(), b.get(), count);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  set_rate(state, 3 * bytes);
}

void BM_reduce_inplace(benchmark::State& state, kolo::DataType t, kolo::ReduceKind op) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / kolo::dtype_size(t);
  Buffer dst = make_buffer(bytes, 1), src = make_buffer(bytes, 2);
  // Summing into dst again and again: integers wrap, floats grow but stay finite for the
  // iteration counts a benchmark reaches (bfloat16/float16 saturate to inf, which costs the
  // same).
  for (auto _ : state) {
    kolo::kernels::reduce_inplace(t, op, dst.get(), src.get(), count);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  set_rate(state, 3 * bytes);
}

void BM_memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffer src = make_buffer(bytes, 1), dst = make_buffer(bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  set_rate(state, 2 * bytes);
}

// Wall-clock rates: what a collective waiting on the kernel sees.
void apply_sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(4)->Range(4 << 10, 64 << 20)->UseRealTime();
}

const bool registered = [] {
  benchmark::RegisterBenchmark("memcpy", BM_memcpy)->Apply(apply_sizes);
  for (int i = 0; i < kolo::kNumDataTypes; ++i) {
    const auto t = static_cast<kolo::DataType>(i);
    const std::string name = kolo::dtype_name(t);
    benchmark::RegisterBenchmark(("reduce_sum/" + name).c_str(), BM_reduce, t)->Apply(apply_sizes);
    benchmark::RegisterBenchmark(("reduce_inplace_sum/" + name).c_str(), BM_reduce_inplace, t, kolo::ReduceKind::sum)
        ->Apply(apply_sizes);
  }
  // The other operators, each on one type (float32; int32 for the bitwise ones): every operator
  // has its own kernel loop, so each gets its own line against memcpy.
  for (kolo::ReduceKind k : {kolo::ReduceKind::prod, kolo::ReduceKind::min, kolo::ReduceKind::max,
                             kolo::ReduceKind::band, kolo::ReduceKind::bor, kolo::ReduceKind::bxor}) {
    const kolo::DataType t = kolo::ReduceOp(k).is_bitwise() ? kolo::DataType::int32 : kolo::DataType::float32;
    const std::string name = std::string("reduce_inplace_") + kolo::reduce_name(k) + "/" + kolo::dtype_name(t);
    benchmark::RegisterBenchmark(name.c_str(), BM_reduce_inplace, t, k)->Apply(apply_sizes);
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("kolo_kernels", kolo::kernels::using_avx512() ? "avx512" : "portable");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
