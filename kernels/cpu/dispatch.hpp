// Internal: the tables of kernel implementations and the choice between them.
//
// Two implementations exist: a portable one (plain loops, auto-vectorised for the baseline
// ISA) and an AVX-512 one (compiled with per-function target attributes, so the library needs
// no -march flag). The active table is chosen once, on first use: AVX-512 when the CPU has
// AVX-512F/BW/VL/DQ, unless the environment says KOLO_KERNELS=portable. Tests and benchmarks
// may switch explicitly with select_kernel_path().
#pragma once
#include <cstddef>
#include <cstdint>
#include "kolo/types.hpp"

// Exported even if the library is built with hidden visibility: the kernel tests and the
// micro-benchmark select the implementation through these.
#define KOLO_KERNELS_INTERNAL_API __attribute__((visibility("default")))

namespace kolo::kernels::detail {

// dst[i] = a[i] (op) b[i]; dst may be a, b, or both, but must not partially overlap them.
using BinaryKernel = void (*)(void* dst, const void* a, const void* b, size_t count);
using ToFloatKernel = void (*)(const uint16_t* src, float* dst, size_t count);
using FromFloatKernel = void (*)(const float* src, uint16_t* dst, size_t count);

struct KernelTable {
  const char* name;
  // Indexed by DataType and ReduceKind. avg and premul_sum hold the sum kernel (their scaling
  // is finalize()'s); bitwise ops on floating types are nullptr.
  BinaryKernel binary[kNumDataTypes][kNumReduceKinds];
  ToFloatKernel half_to_float;
  FromFloatKernel float_to_half;
  ToFloatKernel bfloat16_to_float;
  FromFloatKernel float_to_bfloat16;
};

KOLO_KERNELS_INTERNAL_API const KernelTable& portable_table();
// Defined on x86-64 only; callers must check cpu_has_avx512() first.
KOLO_KERNELS_INTERNAL_API const KernelTable& avx512_table();
// AVX-512F, BW, VL and DQ, all of which the AVX-512 table uses (and the OS saves ZMM state).
KOLO_KERNELS_INTERNAL_API bool cpu_has_avx512();

// A destination at least this large, distinct from both inputs, is written by the AVX-512
// kernels with streaming (non-temporal) stores: it would leave the caches before anyone reads
// it, and bypassing them skips the read-for-ownership of every destination line, which takes
// memory traffic from 4 to 3 transfers per element (about +25% at 64 MiB). Below this size
// the result stays in cache for whoever consumes it next (typically a send).
constexpr size_t kDefaultStreamingStoreThresholdBytes = size_t{8} << 20;
KOLO_KERNELS_INTERNAL_API size_t streaming_store_threshold();
// Tests lower it to run the streaming loop on small buffers; 0 restores the default.
KOLO_KERNELS_INTERNAL_API void set_streaming_store_threshold(size_t bytes);

enum class KernelPath { automatic, portable, avx512 };
// Parses KOLO_KERNELS ("portable", "avx512", "auto"/unset); throws InvalidArgument otherwise.
KOLO_KERNELS_INTERNAL_API KernelPath kernel_path_from_env();
// Makes every later kernel call use `path`; automatic makes the start-up choice again
// (KOLO_KERNELS if set, else AVX-512 exactly when the CPU has it).
// Throws InvalidArgument for avx512 on a CPU without it. Not meant to race with running
// reductions: tests and benchmarks call it between them.
KOLO_KERNELS_INTERNAL_API void select_kernel_path(KernelPath path);
KOLO_KERNELS_INTERNAL_API const KernelTable& active_table();

}  // namespace kolo::kernels::detail
