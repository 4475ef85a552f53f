// Sum kernels over several ranks' buffers (see allreduce_kernels.hpp). One template per
// (element type, number of sources): with N fixed at compile time every thread issues its N
// (times the unroll) 16-byte loads back to back, which is what keeps HBM busy.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <string>
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/cuda_check.hpp"

namespace kolo::cuda_ipc {
namespace {

struct Sources {
  const void* p[kMaxRanks];
};
struct Dests {
  void* p[kMaxRanks];
  int n;
};

constexpr int kThreads = 512;
constexpr int kUnroll = 2;  // vectors in flight per source per thread

// Accumulating 16 bytes of T into float lanes, and packing float lanes back into 16 bytes.
template <typename T>
struct Lanes;

template <>
struct Lanes<float> {
  static constexpr int kWidth = 4;
  __device__ static void add(float (&acc)[kWidth], const uint4& v) {
    acc[0] += __uint_as_float(v.x);
    acc[1] += __uint_as_float(v.y);
    acc[2] += __uint_as_float(v.z);
    acc[3] += __uint_as_float(v.w);
  }
  __device__ static uint4 pack(const float (&acc)[kWidth]) {
    return make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]), __float_as_uint(acc[3]));
  }
  __device__ static float load(const void* p, size_t i) { return static_cast<const float*>(p)[i]; }
  __device__ static void store(void* p, size_t i, float x) { static_cast<float*>(p)[i] = x; }
};

// float16 and bfloat16 share the shape: 8 lanes, 4 pairs, converted pairwise.
template <typename T2, float2 (*ToFloat2)(T2), T2 (*FromFloat2)(float2)>
struct PairLanes {
  static constexpr int kWidth = 8;
  __device__ static void add(float (&acc)[kWidth], const uint4& v) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      T2 pair;
      memcpy(&pair, &words[k], 4);
      const float2 f = ToFloat2(pair);
      acc[2 * k] += f.x;
      acc[2 * k + 1] += f.y;
    }
  }
  __device__ static uint4 pack(const float (&acc)[kWidth]) {
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const T2 pair = FromFloat2(make_float2(acc[2 * k], acc[2 * k + 1]));
      memcpy(&words[k], &pair, 4);
    }
    return make_uint4(words[0], words[1], words[2], words[3]);
  }
};

__device__ float2 bf16x2_to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
__device__ __nv_bfloat162 float2_to_bf16x2(float2 v) { return __float22bfloat162_rn(v); }
__device__ float2 f16x2_to_float2(__half2 v) { return __half22float2(v); }
__device__ __half2 float2_to_f16x2(float2 v) { return __float22half2_rn(v); }

template <>
struct Lanes<__nv_bfloat16> : PairLanes<__nv_bfloat162, bf16x2_to_float2, float2_to_bf16x2> {
  __device__ static float load(const void* p, size_t i) { return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]); }
  __device__ static void store(void* p, size_t i, float x) { static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x); }
};

template <>
struct Lanes<__half> : PairLanes<__half2, f16x2_to_float2, float2_to_f16x2> {
  __device__ static float load(const void* p, size_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
  __device__ static void store(void* p, size_t i, float x) { static_cast<__half*>(p)[i] = __float2half_rn(x); }
};

// Every destination and source already points at the range's first element; nvec 16-byte
// vectors. The sum is written to one destination, or with kAll to N of them. Both counts are
// compile-time constants so that the pointer arrays stay in registers (a runtime index into a
// kernel parameter array would copy it to local memory).
template <typename T, int N, bool kAll>
__global__ void __launch_bounds__(kThreads) sum_vectors(Sources srcs, Dests dsts, size_t nvec) {
  constexpr int kDsts = kAll ? N : 1;
  using L = Lanes<T>;
  const uint4* in[N];
#pragma unroll
  for (int p = 0; p < N; ++p) in[p] = static_cast<const uint4*>(srcs.p[p]);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Unrolled body: all N * kUnroll loads are issued before the first add.
  for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
    uint4 v[kUnroll][N];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int p = 0; p < N; ++p) v[u][p] = in[p][i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float acc[L::kWidth] = {};
#pragma unroll
      for (int p = 0; p < N; ++p) L::add(acc, v[u][p]);
      const uint4 packed = L::pack(acc);
#pragma unroll
      for (int d = 0; d < kDsts; ++d) static_cast<uint4*>(dsts.p[d])[i + u * stride] = packed;
    }
  }
  for (; i < nvec; i += stride) {
    float acc[L::kWidth] = {};
#pragma unroll
    for (int p = 0; p < N; ++p) L::add(acc, in[p][i]);
    const uint4 packed = L::pack(acc);
#pragma unroll
    for (int d = 0; d < kDsts; ++d) static_cast<uint4*>(dsts.p[d])[i] = packed;
  }
}

// Element by element: the tail after the vectors, and buffers not 16-byte aligned.
template <typename T>
__global__ void __launch_bounds__(kThreads) sum_scalars(Sources srcs, int n, Dests dsts, size_t count) {
  using L = Lanes<T>;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float acc = 0.0f;
    for (int p = 0; p < n; ++p) acc += L::load(srcs.p[p], i);
    for (int d = 0; d < dsts.n; ++d) L::store(dsts.p[d], i, acc);
  }
}

int sm_count() {
  // Asked once per device: cudaDeviceGetAttribute is cheap but not free at 8-byte sizes.
  static std::array<int, 64> cached{};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (device < 0 || device >= static_cast<int>(cached.size())) device = 0;
  if (cached[device] == 0) {
    int count = 0;
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    cached[device] = count > 0 ? count : 1;
  }
  return cached[device];
}

unsigned blocks_for(size_t items) {
  // Enough resident blocks to cover the GPU a few times over; grid-stride loops do the rest.
  const size_t wanted = (items + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(sm_count()) * 4;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

template <typename T, int N>
void launch_vectors(const Sources& s, const Dests& d, size_t nvec, cudaStream_t stream) {
  if (d.n == 1) {
    sum_vectors<T, N, false><<<blocks_for(nvec), kThreads, 0, stream>>>(s, d, nvec);
  } else {
    sum_vectors<T, N, true><<<blocks_for(nvec), kThreads, 0, stream>>>(s, d, nvec);
  }
}

template <typename T>
void launch_typed(void* const* dst, int ndst, const void* const* srcs, int n, size_t begin, size_t end,
                  cudaStream_t stream) {
  constexpr size_t kSize = sizeof(T);
  constexpr size_t kWidth = 16 / kSize;
  Sources s{};
  Dests out{};
  out.n = ndst;
  bool aligned = true;
  for (int p = 0; p < n; ++p) {
    s.p[p] = static_cast<const char*>(srcs[p]) + begin * kSize;
    aligned = aligned && reinterpret_cast<uintptr_t>(s.p[p]) % 16 == 0;
  }
  for (int d = 0; d < ndst; ++d) {
    out.p[d] = static_cast<char*>(dst[d]) + begin * kSize;
    aligned = aligned && reinterpret_cast<uintptr_t>(out.p[d]) % 16 == 0;
  }
  const size_t count = end - begin;
  const size_t nvec = aligned ? count / kWidth : 0;
  if (nvec > 0) {
    switch (n) {
      case 1: launch_vectors<T, 1>(s, out, nvec, stream); break;
      case 2: launch_vectors<T, 2>(s, out, nvec, stream); break;
      case 3: launch_vectors<T, 3>(s, out, nvec, stream); break;
      case 4: launch_vectors<T, 4>(s, out, nvec, stream); break;
      case 5: launch_vectors<T, 5>(s, out, nvec, stream); break;
      case 6: launch_vectors<T, 6>(s, out, nvec, stream); break;
      case 7: launch_vectors<T, 7>(s, out, nvec, stream); break;
      default: launch_vectors<T, 8>(s, out, nvec, stream); break;
    }
    check(cudaGetLastError(), "launching the vector sum kernel");
  }
  const size_t done = nvec * kWidth;
  if (done < count) {
    for (int p = 0; p < n; ++p) s.p[p] = static_cast<const char*>(s.p[p]) + done * kSize;
    for (int d = 0; d < ndst; ++d) out.p[d] = static_cast<char*>(out.p[d]) + done * kSize;
    sum_scalars<T><<<blocks_for(count - done), kThreads, 0, stream>>>(s, n, out, count - done);
    check(cudaGetLastError(), "launching the scalar sum kernel");
  }
}

}  // namespace

bool allreduce_supports(DataType t) {
  return t == DataType::float32 || t == DataType::bfloat16 || t == DataType::float16;
}

size_t element_size(DataType t) {
  switch (t) {
    case DataType::float32: return 4;
    case DataType::bfloat16:
    case DataType::float16: return 2;
    default: throw InvalidArgument("cuda_ipc: all-reduce sums float32, float16 and bfloat16 only");
  }
}

void launch_sum(DataType t, void* const* dsts, int ndst, const void* const* srcs, int n, size_t begin, size_t end,
                cudaStream_t stream) {
  if (n < 1 || n > kMaxRanks) throw InvalidArgument("cuda_ipc: launch_sum over " + std::to_string(n) + " sources");
  if (ndst != 1 && ndst != n) {
    throw InvalidArgument("cuda_ipc: launch_sum writes into 1 or n buffers, not " + std::to_string(ndst));
  }
  if (end <= begin) return;
  switch (t) {
    case DataType::float32: launch_typed<float>(dsts, ndst, srcs, n, begin, end, stream); break;
    case DataType::bfloat16: launch_typed<__nv_bfloat16>(dsts, ndst, srcs, n, begin, end, stream); break;
    case DataType::float16: launch_typed<__half>(dsts, ndst, srcs, n, begin, end, stream); break;
    default: throw InvalidArgument("cuda_ipc: all-reduce sums float32, float16 and bfloat16 only");
  }
}

}  // namespace kolo::cuda_ipc
