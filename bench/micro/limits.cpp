// kolo-bench-limits: the machine's own limits that bound a collective on one host, measured with
// plain loops (no kolo code), so compare.sh can report kolo's bus bandwidth as a share of them:
//   memcpy   dst = src           GB/s counted as bytes copied (one buffer size per pass)
//   reduce   a += b (float32)    GB/s counted as bytes of b reduced into a
//   cma      dst = src through process_vm_readv (this process reading itself: the kernel path
//            that copies a large shared-memory message, cross-memory attach), GB/s copied;
//            pages pinned and mapped 4 KiB at a time make it slower than memcpy, and it bounds
//            any single-copy transfer between two processes without a shared mapping
// each on 1 thread and on every core (one private buffer set per thread, rates summed).
//   kolo-bench-limits [--bytes N] [--seconds S] [--threads T]    prints one JSON object
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<unsigned char, FreeDeleter>;

Bytes page_aligned(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(4096, rounded));
  if (p == nullptr) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 1, rounded);  // fault every page in before timing
  return Bytes(p);
}

enum class Kernel { memcpy, reduce, cma };

// a += b over float32; small values, so no denormals or infinities for the passes we run.
void reduce_into(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

// Bytes per second of one thread running `kernel` over private buffers until `seconds` pass.
double run_one(Kernel kernel, size_t bytes, double seconds, std::atomic<bool>& go) {
  Bytes src = page_aligned(bytes), dst = page_aligned(bytes);
  auto* a = reinterpret_cast<float*>(dst.get());
  auto* b = reinterpret_cast<const float*>(src.get());
  std::fill(a, a + bytes / 4, 0.0f);
  while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  size_t passes = 0;
  double elapsed = 0;
  do {
    if (kernel == Kernel::memcpy) {
      std::memcpy(dst.get(), src.get(), bytes);
    } else if (kernel == Kernel::cma) {
      const iovec local{dst.get(), bytes}, remote{src.get(), bytes};
      if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes))
        return -1;  // not permitted here (seccomp, a restricted container): no figure
    } else {
      reduce_into(a, b, bytes / 4);
    }
    ++passes;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  // Keeps the result observable so the loops cannot be dropped.
  volatile unsigned char sink = dst.get()[bytes / 2];
  (void)sink;
  return static_cast<double>(passes) * static_cast<double>(bytes) / elapsed;
}

double run(Kernel kernel, int threads, size_t bytes, double seconds) {
  std::vector<double> rates(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  std::atomic<bool> go{false};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { rates[static_cast<size_t>(t)] = run_one(kernel, bytes, seconds, go); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let every thread allocate first
  go.store(true, std::memory_order_release);
  for (std::thread& t : pool) t.join();
  double total = 0;
  for (double r : rates) {
    if (r < 0) return -1;
    total += r;
  }
  return total;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "kolo-bench-limits: %s\nusage: kolo-bench-limits [--bytes N] [--seconds S] [--threads T]\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;  // well past every cache level
  double seconds = 0.5;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(("option '" + arg + "' needs a value").c_str());
    const char* value = argv[++i];
    char* end = nullptr;
    if (arg == "--bytes") {
      bytes = std::strtoull(value, &end, 10);
      if (*end != '\0' || bytes < 4096) usage("--bytes must be an integer >= 4096");
    } else if (arg == "--seconds") {
      seconds = std::strtod(value, &end);
      if (*end != '\0' || !(seconds > 0) || seconds > 60) usage("--seconds must be in (0, 60]");
    } else if (arg == "--threads") {
      threads = static_cast<int>(std::strtol(value, &end, 10));
      if (*end != '\0' || threads < 1 || threads > 1024) usage("--threads must be in [1, 1024]");
    } else {
      usage(("unknown option '" + arg + "'").c_str());
    }
  }
  bytes = bytes / 64 * 64;
  try {
    const double copy1 = run(Kernel::memcpy, 1, bytes, seconds);
    const double copyn = run(Kernel::memcpy, threads, bytes, seconds);
    const double red1 = run(Kernel::reduce, 1, bytes, seconds);
    const double redn = run(Kernel::reduce, threads, bytes, seconds);
    const double cma1 = run(Kernel::cma, 1, bytes, seconds);
    const double cman = cma1 < 0 ? -1 : run(Kernel::cma, threads, bytes, seconds);
    std::printf(
        "{\"buffer_bytes\": %zu, \"threads\": %d, \"memcpy_1_gbs\": %.3f, \"memcpy_all_gbs\": %.3f, "
        "\"reduce_f32_1_gbs\": %.3f, \"reduce_f32_all_gbs\": %.3f",
        bytes, threads, copy1 / 1e9, copyn / 1e9, red1 / 1e9, redn / 1e9);
    if (cma1 >= 0 && cman >= 0) std::printf(", \"cma_1_gbs\": %.3f, \"cma_all_gbs\": %.3f", cma1 / 1e9, cman / 1e9);
    std::printf("}\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-bench-limits: %s\n", e.what());
    return 3;
  }
  return 0;
}
