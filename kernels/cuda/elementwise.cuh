// Internal (nvcc only): one grid-stride kernel shape for every reduction and finalize.
//
// out[k][i] = fn(in[0][i] [, in[1][i]]) for k < kOutputs: reduce (2 inputs, 1 output),
// reduce_copy2 (2 inputs, 2 outputs), finalize (1 input, 1 output, in place).
//
// Bandwidth: when every pointer has the same offset within 16 bytes, the elements between the
// first and the last 16-byte boundary move as 16-byte vectors (uint4 loads/stores), and the
// few elements before/after (fewer than one vector each) are done one by one. Otherwise the
// whole range goes element by element. Either way each thread issues kUnroll independent
// loads per input before its first store, so enough bytes are in flight to saturate HBM, and
// the grid is sized to fill every SM with resident blocks and no more: extra work is
// taken by the grid-stride loop, not by more blocks.
//
// Aliasing: an output may be exactly an input; element i is read before it is written and
// only by the thread that writes it, so in-place use is safe (partial overlap is not).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include "kernels/cuda/launchers.hpp"
#include "kolo/types.hpp"

// The loops below are host-and-device code (see elementwise_thread); only the device pass
// knows "#pragma unroll", and the host compiler would warn about it.
#if defined(__CUDA_ARCH__)
#define KOLO_UNROLL _Pragma("unroll")
#else
#define KOLO_UNROLL
#endif

namespace kolo::kernels::cuda::detail {

constexpr int kThreadsPerBlock = 256;
constexpr int kUnroll = 4;
constexpr size_t kVectorBytes = 16;

struct Pointers {
  void* out[2];
  const void* in[2];
};

// 16 bytes seen as one uint4 (for the memory access) or as elements (for the arithmetic).
template <class T>
union Vector {
  static constexpr int kLanes = kVectorBytes / sizeof(T);
  uint4 raw;
  T lane[kLanes];
  __host__ __device__ Vector() {}
};

template <class T, class Fn, int kInputs, int kOutputs>
__host__ __device__ __forceinline__ void apply_one(const Pointers& p, const Fn& fn, size_t i) {
  T r;
  if constexpr (kInputs == 2) {
    r = fn(static_cast<const T*>(p.in[0])[i], static_cast<const T*>(p.in[1])[i]);
  } else {
    r = fn(static_cast<const T*>(p.in[0])[i]);
  }
  static_cast<T*>(p.out[0])[i] = r;
  if constexpr (kOutputs == 2) static_cast<T*>(p.out[1])[i] = r;
}

// Element-wise over [begin, end) with kUnroll loads in flight per thread: used when the
// pointers are not mutually 16-byte aligned (and it is then the whole range).
template <class T, class Fn, int kInputs, int kOutputs>
__host__ __device__ __forceinline__ void scalar_range(const Pointers& p, const Fn& fn, size_t begin, size_t end,
                                             size_t thread, size_t threads) {
  const T* in0 = static_cast<const T*>(p.in[0]);
  const T* in1 = static_cast<const T*>(p.in[1]);
  for (size_t base = begin + thread; base < end; base += threads * kUnroll) {
    T x[kUnroll], y[kUnroll];
KOLO_UNROLL
    for (int j = 0; j < kUnroll; ++j) {
      const size_t i = base + j * threads;
      if (i < end) {
        x[j] = in0[i];
        if constexpr (kInputs == 2) y[j] = in1[i];
      }
    }
KOLO_UNROLL
    for (int j = 0; j < kUnroll; ++j) {
      const size_t i = base + j * threads;
      if (i < end) {
        T r;
        if constexpr (kInputs == 2) {
          r = fn(x[j], y[j]);
        } else {
          r = fn(x[j]);
        }
        static_cast<T*>(p.out[0])[i] = r;
        if constexpr (kOutputs == 2) static_cast<T*>(p.out[1])[i] = r;
      }
    }
  }
}

// Vectors [0, vectors) of the 16-byte aligned body starting at element `first`.
template <class T, class Fn, int kInputs, int kOutputs>
__host__ __device__ __forceinline__ void vector_range(const Pointers& p, const Fn& fn, size_t first, size_t vectors,
                                             size_t thread, size_t threads) {
  using V = Vector<T>;
  const uint4* in0 = reinterpret_cast<const uint4*>(static_cast<const T*>(p.in[0]) + first);
  const uint4* in1 = kInputs == 2 ? reinterpret_cast<const uint4*>(static_cast<const T*>(p.in[1]) + first) : nullptr;
  uint4* out0 = reinterpret_cast<uint4*>(static_cast<T*>(p.out[0]) + first);
  uint4* out1 = kOutputs == 2 ? reinterpret_cast<uint4*>(static_cast<T*>(p.out[1]) + first) : nullptr;
  for (size_t base = thread; base < vectors; base += threads * kUnroll) {
    V x[kUnroll], y[kUnroll];
KOLO_UNROLL
    for (int j = 0; j < kUnroll; ++j) {
      const size_t v = base + j * threads;
      if (v < vectors) {
        x[j].raw = in0[v];
        if constexpr (kInputs == 2) y[j].raw = in1[v];
      }
    }
KOLO_UNROLL
    for (int j = 0; j < kUnroll; ++j) {
      const size_t v = base + j * threads;
      if (v < vectors) {
        V r;
KOLO_UNROLL
        for (int lane = 0; lane < V::kLanes; ++lane) {
          if constexpr (kInputs == 2) {
            r.lane[lane] = fn(x[j].lane[lane], y[j].lane[lane]);
          } else {
            r.lane[lane] = fn(x[j].lane[lane]);
          }
        }
        out0[v] = r.raw;
        if constexpr (kOutputs == 2) out1[v] = r.raw;
      }
    }
  }
}

// How [0, count) splits for a set of pointers (the first `pointers` of `all`).
struct Split {
  bool vectorized;  // all pointers share their offset within 16 bytes
  size_t head;      // elements before the first 16-byte boundary (vectorized only)
  size_t vectors;   // full 16-byte vectors after them (vectorized only)
  size_t work_items;  // vectors plus the elements done one by one
};

template <class T>
Split split_for(const void* const* all, int pointers, size_t count) {
  constexpr size_t kLanes = Vector<T>::kLanes;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(all[0]) % kVectorBytes;
  bool vectorized = true;
  for (int i = 1; i < pointers; ++i) {
    vectorized = vectorized && reinterpret_cast<uintptr_t>(all[i]) % kVectorBytes == offset;
  }
  if (!vectorized) return {false, 0, 0, count};
  // Pointers are element-aligned (checked by the caller), so the gap to the boundary is a
  // whole number of elements.
  const size_t head = std::min(count, ((kVectorBytes - offset) % kVectorBytes) / sizeof(T));
  const size_t vectors = (count - head) / kLanes;
  return {true, head, vectors, vectors + (count - vectors * kLanes)};
}

// What thread `thread` of `threads` does. Threads share no data (element i belongs to one
// thread), so running the threads one after another on the host gives the same result, which
// is how the indexing can be exercised without a GPU.
template <class T, class Fn, int kInputs, int kOutputs>
__host__ __device__ __forceinline__ void elementwise_thread(const Pointers& p, const Fn& fn, size_t count,
                                                            const Split& split, size_t thread, size_t threads) {
  if (!split.vectorized) {
    scalar_range<T, Fn, kInputs, kOutputs>(p, fn, 0, count, thread, threads);
    return;
  }
  // Head and tail hold fewer than one vector each, and a grid has at least one block of
  // kThreadsPerBlock threads: one element per thread at most.
  const size_t tail_begin = split.head + split.vectors * Vector<T>::kLanes;
  if (thread < split.head) apply_one<T, Fn, kInputs, kOutputs>(p, fn, thread);
  if (tail_begin + thread < count) apply_one<T, Fn, kInputs, kOutputs>(p, fn, tail_begin + thread);
  vector_range<T, Fn, kInputs, kOutputs>(p, fn, split.head, split.vectors, thread, threads);
}

template <class T, class Fn, int kInputs, int kOutputs>
__global__ void __launch_bounds__(kThreadsPerBlock) elementwise_kernel(Pointers p, Fn fn, size_t count, Split split) {
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  elementwise_thread<T, Fn, kInputs, kOutputs>(p, fn, count, split, thread, threads);
}

// How many blocks of `kernel` (kThreadsPerBlock threads) one SM of the current device holds
// at once. Asked once per kernel instantiation: a process drives one kind of GPU.
template <class Kernel>
int blocks_per_sm(Kernel kernel) {
  int blocks = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreadsPerBlock, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks > 0 ? blocks : 1;
}

// Chooses the vector split and the grid for `count` elements of T and launches on `stream`.
// `what` names the operation in error messages.
template <class T, class Fn, int kInputs, int kOutputs>
void launch_elementwise(const Pointers& p, const Fn& fn, size_t count, cudaStream_t stream, const char* what) {
  if (count == 0) return;
  const void* const all[] = {p.out[0], p.in[0], kInputs == 2 ? p.in[1] : p.in[0], kOutputs == 2 ? p.out[1] : p.out[0]};
  const Split split = split_for<T>(all, 4, count);
  // One work item per thread until every SM holds as many blocks as can be resident at once
  // (the kernel's register use decides: about 4 of 256 threads here); beyond that threads
  // loop rather than queueing a second wave of blocks. Small counts get few blocks.
  static const int resident_blocks = blocks_per_sm(elementwise_kernel<T, Fn, kInputs, kOutputs>);
  const size_t wanted_blocks = (split.work_items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const size_t max_blocks = static_cast<size_t>(sm_count()) * static_cast<size_t>(resident_blocks);
  const unsigned blocks = static_cast<unsigned>(std::max<size_t>(1, std::min(wanted_blocks, max_blocks)));
  elementwise_kernel<T, Fn, kInputs, kOutputs><<<blocks, kThreadsPerBlock, 0, stream>>>(p, fn, count, split);
  check(cudaGetLastError(), std::string(what) + ": kernel launch");
}

// The reduction of 2 inputs into 1 or 2 outputs (dst2 null: reduce, else reduce_copy2).
template <class T, class Fn>
void launch_reduce(const ReduceTargets& t, size_t count, cudaStream_t stream, const char* what) {
  if (t.dst2 == nullptr) {
    launch_elementwise<T, Fn, 2, 1>(Pointers{{t.dst1, nullptr}, {t.a, t.b}}, Fn{}, count, stream, what);
  } else {
    launch_elementwise<T, Fn, 2, 2>(Pointers{{t.dst1, t.dst2}, {t.a, t.b}}, Fn{}, count, stream, what);
  }
}

// In-place unary map (finalize).
template <class T, class Fn>
void launch_map(void* data, const Fn& fn, size_t count, cudaStream_t stream, const char* what) {
  launch_elementwise<T, Fn, 1, 1>(Pointers{{data, nullptr}, {data, nullptr}}, fn, count, stream, what);
}

}  // namespace kolo::kernels::cuda::detail
