// kolo-ipc-test: what the parts share (ipc_test_support.hpp).
#include "ipc_test_support.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include "kolo/types.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"

namespace ipc_test {

int g_rank = 0, g_world = 1, g_failures = 0, g_passed = 0;

// Small integers: exact in float32 and bfloat16, and so are their sums over up to 8 ranks, so
// every element is compared exactly.
float input_value(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 31) - 15); }

float expected_sum(size_t i) {
  float s = 0;
  for (int r = 0; r < g_world; ++r) s += input_value(r, i);
  return s;
}

std::string g_ordering = "events";
Mem g_mem = Mem::device;
const char* mem_name(Mem m) { return m == Mem::device ? "device" : m == Mem::managed ? "managed" : "pool"; }



size_t esize(DataType t) { return kolo::cuda_ipc::element_size(t); }

// On the test's stream, and waited for: the comm's stream is non-blocking, so a plain
// cudaMemcpy/cudaMemset (legacy default stream, and a pageable upload may return before its
// DMA is done) would not be ordered before the all-reduce that reads the buffer.
void upload_inputs(void* dev, DataType t, size_t count, int rank, cudaStream_t s) {
  std::vector<uint8_t> host(count * esize(t));
  for (size_t i = 0; i < count; ++i) {
    const float v = input_value(rank, i);
    if (t == DataType::float32) {
      std::memcpy(host.data() + i * 4, &v, 4);
    } else if (t == DataType::float16) {
      const __half h = __float2half(v);
      std::memcpy(host.data() + i * 2, &h, 2);
    } else {
      const __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(host.data() + i * 2, &b, 2);
    }
  }
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

// The first wrong element, or "" when all are right.
std::string verify(const void* dev, DataType t, size_t count) {
  std::vector<uint8_t> host(count * esize(t));
  check(cudaMemcpy(host.data(), dev, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (size_t i = 0; i < count; ++i) {
    float got;
    if (t == DataType::float32) {
      std::memcpy(&got, host.data() + i * 4, 4);
    } else if (t == DataType::float16) {
      __half h;
      std::memcpy(&h, host.data() + i * 2, 2);
      got = __half2float(h);
    } else {
      __nv_bfloat16 b;
      std::memcpy(&b, host.data() + i * 2, 2);
      got = __bfloat162float(b);
    }
    if (got != expected_sum(i)) {
      return "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " + std::to_string(got) +
             ", want " + std::to_string(expected_sum(i));
    }
  }
  return "";
}

// Runs one named check on every rank; a rank prints FAILED with its reason, rank 0 prints OK.
void run_case(const std::string& name, const std::function<std::string()>& body) {
  if (g_rank == 0) std::printf("[ RUN      ] %s\n", name.c_str());
  std::string why;
  try {
    why = body();
  } catch (const std::exception& e) {
    // An exception (a timeout, a CUDA error) leaves the ranks out of step: stop the run here
    // rather than let every later call wait out its timeout.
    std::printf("[  FAILED  ] %s (rank %d): exception: %s\n", name.c_str(), g_rank, e.what());
    std::fflush(stdout);
    throw;
  }
  if (why.empty()) {
    ++g_passed;
    if (g_rank == 0) std::printf("[       OK ] %s\n", name.c_str());
  } else {
    ++g_failures;
    std::printf("[  FAILED  ] %s (rank %d): %s\n", name.c_str(), g_rank, why.c_str());
  }
  std::fflush(stdout);
}

// The other collectives (reduce-scatter, all-gather, broadcast, reduce, all-to-all): inputs from
// input_value(rank, i) in float32, bfloat16 or int64 (moves only), every element of every
// output compared exactly with a reference computed here.
std::vector<uint8_t> encode(DataType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * kolo::dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::float32) {
      std::memcpy(b.data() + i * 4, &v[i], 4);
    } else if (t == DataType::bfloat16) {
      const __nv_bfloat16 x = __float2bfloat16(v[i]);
      std::memcpy(b.data() + i * 2, &x, 2);
    } else {
      const int64_t x = static_cast<int64_t>(v[i]) * 1000003;  // high bytes in use too
      std::memcpy(b.data() + i * 8, &x, 8);
    }
  }
  return b;
}

std::string compare(DataType t, const void* dev, const std::vector<float>& want, const std::string& what) {
  const std::vector<uint8_t> w = encode(t, want);
  std::vector<uint8_t> got(w.size());
  check(cudaMemcpy(got.data(), dev, got.size(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  const size_t es = kolo::dtype_size(t);
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(got.data() + i * es, w.data() + i * es, es) != 0)
      return what + ": element " + std::to_string(i) + " of " + std::to_string(want.size()) + " is wrong (want " +
             std::to_string(want[i]) + ")";
  return "";
}

void upload(void* dev, const std::vector<uint8_t>& host, cudaStream_t s) {
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

std::vector<float> values(int rank, size_t n, size_t first) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input_value(rank, first + i);
  return v;
}

const char* type_name(DataType t) { return kolo::dtype_name(t); }

}  // namespace ipc_test
