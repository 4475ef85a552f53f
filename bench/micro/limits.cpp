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

#include "common/cli.hpp"
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

const char* const kUsage = "usage: kolo-bench-limits [--bytes N] [--seconds S] [--threads T]\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "kolo-bench-limits: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;  // well past every cache level
  double seconds = 0.5;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool help = false;
  CLI::App app{"", "kolo-bench-limits"};
  kolo::cli::configure(app, kUsage);
  app.description("The machine's memcpy, float32 reduction and cross-memory-attach bandwidth on 1 thread and on\n"
                  "every core, as one JSON object.");
  CLI::Option* bytes_opt =
      app.add_option("--bytes", bytes, "buffer size per thread, >= 4096 (64 MiB: past every cache level)")->type_name("N");
  CLI::Option* seconds_opt = app.add_option("--seconds", seconds, "time per measurement, in (0, 60] (0.5)")->type_name("S");
  CLI::Option* threads_opt =
      app.add_option("--threads", threads, "threads of the all-core runs, in [1, 1024] (the cores)")->type_name("T");
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const CLI::Error& e) {
    usage(e.what());
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
  }
  if (bytes_opt->count() > 0 && bytes < 4096) usage("--bytes must be an integer >= 4096");
  if (seconds_opt->count() > 0 && (!(seconds > 0) || seconds > 60)) usage("--seconds must be in (0, 60]");
  if (threads_opt->count() > 0 && (threads < 1 || threads > 1024)) usage("--threads must be in [1, 1024]");
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
