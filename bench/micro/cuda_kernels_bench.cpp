// Bandwidth of the CUDA reduction kernels against a device-to-device copy moving the same
// bytes, per dtype, 1 MiB .. 1 GiB per operand buffer.
//
// GB/s counts bytes read + written (10^9 bytes per second): reduce reads a and b and writes
// dst, 3x the buffer size; the reference copy moves 1.5x the buffer size (read once, written
// once), the same 3x. "% copy" is reduce GB/s over copy GB/s at that size: the share of the
// bandwidth the memory system delivers to the simplest streaming kernel that the reduction
// achieves. Times come from CUDA events around a batch of back-to-back launches.
//
// The last lines ("SUMMARY ...") give, per dtype, the lowest and the mean "% copy" over sizes
// of at least 64 MiB, where launch overhead no longer matters (scripts/env/gpu-check.sh reads them).
// Without a CUDA device it says so and exits 0.
//
//   kolo-bench-cuda-kernels [--op sum] [--dtypes float32,bfloat16] [--min-bytes 1M] [--max-bytes 1G]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "common/byte_size.hpp"
#include "common/cli.hpp"
#include "kernels/cuda/cuda_api.hpp"
#include "kolo/error.hpp"
#include "kolo/types.hpp"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSummaryMinBytes = 64 * kMiB;
// Each measurement runs launches until this much time has passed (at least kMinIterations).
constexpr double kTargetSeconds = 0.05;
constexpr int kMinIterations = 5;
constexpr auto kWaitTimeout = std::chrono::seconds(120);

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Bounded wait for an event (a hung kernel ends the benchmark with an error, not a hang).
void wait_event(cudaEvent_t event) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitTimeout;
  for (;;) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, "cudaEventQuery");
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("GPU work did not finish in time");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

struct Options {
  kolo::ReduceKind op = kolo::ReduceKind::sum;
  std::vector<kolo::DataType> dtypes;
  size_t min_bytes = kMiB;
  size_t max_bytes = size_t{1} << 30;
};

size_t parse_size(const std::string& text) {
  const std::optional<uint64_t> bytes = kolo::common::parse_byte_size(text, /*allow_fraction=*/true);
  if (!bytes) throw std::invalid_argument("bad size '" + text + "' (use e.g. 64M, 1G)");
  return static_cast<size_t>(*bytes);
}

// Throws std::invalid_argument for a bad command line; with -h/--help prints the help and exits 0.
Options parse_options(int argc, char** argv) {
  Options o;
  std::string op = "sum", dtypes, min_bytes = "1M", max_bytes = "1G";
  bool help = false;
  CLI::App app{"", "kolo-bench-cuda-kernels"};
  kolo::cli::configure(app, "usage: kolo-bench-cuda-kernels [--op sum] [--dtypes float32,bfloat16] [--min-bytes 1M] [--max-bytes 1G]\n");
  app.description("Bandwidth of the CUDA reduction kernels against a device-to-device copy, per dtype and size.");
  app.add_option("--op", op, "the reduction (sum)")->type_name("OP");
  CLI::Option* dtypes_given =
      app.add_option("--dtypes", dtypes, "comma-separated dtypes (every one the op supports)")->type_name("LIST");
  app.add_option("--min-bytes", min_bytes, "smallest buffer per operand, e.g. 64M (1M)")->type_name("SIZE");
  app.add_option("--max-bytes", max_bytes, "largest buffer per operand (1G)")->type_name("SIZE");
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    throw std::invalid_argument(std::string(e.what()) + " (expected --op, --dtypes, --min-bytes, --max-bytes)");
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    std::exit(0);
  }
  o.op = kolo::parse_reduce(op);
  if (dtypes_given->count() > 0) {
    for (size_t start = 0; start <= dtypes.size();) {
      const size_t comma = std::min(dtypes.find(',', start), dtypes.size());
      o.dtypes.push_back(kolo::parse_dtype(dtypes.substr(start, comma - start)));
      start = comma + 1;
    }
  }
  o.min_bytes = parse_size(min_bytes);
  o.max_bytes = parse_size(max_bytes);
  if (o.dtypes.empty()) {
    for (int t = 0; t < kolo::kNumDataTypes; ++t) {
      const auto dtype = static_cast<kolo::DataType>(t);
      if (kolo::ReduceOp(o.op).is_bitwise() && kolo::is_floating(dtype)) continue;
      o.dtypes.push_back(dtype);
    }
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) throw std::invalid_argument("need 0 < --min-bytes <= --max-bytes");
  return o;
}

class Timer {
 public:
  Timer() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  // Seconds per call of `launch`, averaged over a batch sized to last about kTargetSeconds.
  template <class Launch>
  double seconds_per_call(cudaStream_t stream, Launch launch) {
    launch();  // warm-up (first-launch costs, occupancy query)
    const double once = time_batch(stream, launch, 1);
    const int iterations = std::max(kMinIterations, static_cast<int>(std::min(1000.0, kTargetSeconds / once)));
    return time_batch(stream, launch, iterations) / iterations;
  }

 private:
  template <class Launch>
  double time_batch(cudaStream_t stream, Launch launch, int iterations) {
    check(cudaEventRecord(start_, stream), "cudaEventRecord");
    for (int i = 0; i < iterations; ++i) launch();
    check(cudaEventRecord(stop_, stream), "cudaEventRecord");
    wait_event(stop_);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return std::max(1e-9, static_cast<double>(ms) / 1e3);
  }
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

std::string size_label(size_t bytes) {
  char text[32];
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) {
    std::snprintf(text, sizeof text, "%zu GiB", bytes >> 30);
  } else if (bytes >= kMiB && bytes % kMiB == 0) {
    std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  } else {
    std::snprintf(text, sizeof text, "%zu B", bytes);
  }
  return text;
}

struct DeviceMemory {
  explicit DeviceMemory(size_t bytes) { check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* ptr = nullptr;
};

int run(const Options& o) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("device %d: %s, %d SMs, %.1f GiB, op %s\n", device, prop.name, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1 << 30), kolo::reduce_name(o.op));

  // The copy reads 1.5x a buffer from `a` into `dst`, so both are that large.
  const size_t copy_capacity = o.max_bytes + o.max_bytes / 2;
  DeviceMemory a(copy_capacity), b(o.max_bytes), dst(copy_capacity);
  // Small normal values in every format (0x11 bytes): no NaN, no overflow under sum.
  check(cudaMemset(a.ptr, 0x11, copy_capacity), "cudaMemset");
  check(cudaMemset(b.ptr, 0x11, o.max_bytes), "cudaMemset");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Timer timer;

  struct Summary {
    double min_pct = 1e9, sum_pct = 0;
    int sizes = 0;
  };
  std::vector<Summary> summaries(o.dtypes.size());

  std::printf("\n%10s  %-9s  %12s  %12s  %7s\n", "buffer", "dtype", "reduce GB/s", "copy GB/s", "% copy");
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const size_t traffic = 3 * bytes;
    const double copy_seconds = timer.seconds_per_call(stream, [&] {
      check(cudaMemcpyAsync(dst.ptr, a.ptr, bytes + bytes / 2, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    });
    const double copy_gbps = static_cast<double>(traffic) / copy_seconds / 1e9;
    for (size_t d = 0; d < o.dtypes.size(); ++d) {
      const kolo::DataType t = o.dtypes[d];
      const size_t count = bytes / kolo::dtype_size(t);
      const double seconds = timer.seconds_per_call(stream, [&] {
        kolo::kernels::cuda::reduce(t, o.op, dst.ptr, a.ptr, b.ptr, count, static_cast<void*>(stream));
      });
      const double gbps = static_cast<double>(traffic) / seconds / 1e9;
      const double pct = 100.0 * gbps / copy_gbps;
      std::printf("%10s  %-9s  %12.1f  %12.1f  %6.1f%%\n", size_label(bytes).c_str(), kolo::dtype_name(t), gbps,
                  copy_gbps, pct);
      if (bytes >= kSummaryMinBytes) {
        summaries[d].min_pct = std::min(summaries[d].min_pct, pct);
        summaries[d].sum_pct += pct;
        ++summaries[d].sizes;
      }
    }
    if (bytes > o.max_bytes / 2) break;  // the next doubling would pass the maximum (or overflow)
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");

  std::printf("\n");
  for (size_t d = 0; d < o.dtypes.size(); ++d) {
    if (summaries[d].sizes == 0) continue;
    std::printf("SUMMARY dtype=%s op=%s min_pct=%.1f mean_pct=%.1f sizes=%d (buffers >= %s)\n",
                kolo::dtype_name(o.dtypes[d]), kolo::reduce_name(o.op), summaries[d].min_pct,
                summaries[d].sum_pct / summaries[d].sizes, summaries[d].sizes, size_label(kSummaryMinBytes).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (!kolo::kernels::cuda_available()) {
      std::printf("no CUDA device: %s; nothing to measure\n", kolo::kernels::cuda_probe().error.c_str());
      return 0;
    }
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-cuda-kernels: %s\n", e.what());
    return 1;
  }
}
