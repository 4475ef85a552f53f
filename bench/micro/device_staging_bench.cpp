// What one staged device operation is made of, each part timed alone on the GPU (medians of 200):
// the round trips of the primitives the engine's staging uses (kernels/device_runtime.hpp):
//   copy-out   an 8-byte copy device -> pinned host, then an event the host polls until done
//   flag-host  a stream waiting on a flag in pinned host memory that the host then raises,
//              until an event behind the wait is done (the GPU's polling of host memory)
//   flag-gpu   one stream raises the flag (cuStreamWriteValue32), another waits on it, an
//              event behind the wait (a copy back's signal to the caller's stream)
//   pin        pinning host memory (cudaHostAlloc + free) of 64 KiB and 64 MiB
// and then a whole 8-byte all-reduce on device memory in a group of one (issue + wait +
// stream synchronize), with what the engine adds on top. Prints one line per part.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/device_runtime.hpp"
#include "kolo/kolo.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class Fn>
double median_us(int reps, Fn fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void spin_done(kolo::kernels::DeviceRuntime& rt, void* e) {
  while (!rt.done(e)) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kolo;
  if (argc > 1) {  // it takes no arguments: --help, or anything else, gets the usage
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    std::fprintf(help ? stdout : stderr,
                 "usage: kolo-bench-device-staging\nTimes the parts of one staged device operation on GPU 0 (no "
                 "arguments; without a device it says SKIPPED and exits 0).\n");
    return help ? 0 : 2;
  }
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (!rt || rt->device_count() == 0) {
    std::printf("SKIPPED device staging bench: no device (%s)\n", rt ? rt->unavailable_reason().c_str() : "no runtime");
    return 0;
  }
  rt->set_device(0);
  void* s = rt->create_stream();
  void* s2 = rt->create_stream();
  void* e = rt->create_event();
  auto* flag = static_cast<uint32_t*>(rt->alloc_host(4096));
  char* host = static_cast<char*>(rt->alloc_host(1 << 16));
  char* dev = static_cast<char*>(rt->alloc_device(1 << 16));
  const int reps = 200;
  std::printf("PART copy-out us=%.2f\n", median_us(reps, [&] {
                rt->copy(host, dev, 8, s);
                rt->record(e, s);
                spin_done(*rt, e);
              }));
  const bool flags = rt->can_wait_on_flags();
  std::printf("PART flag-waits supported=%d\n", flags ? 1 : 0);
  if (flags) {
    uint32_t v = 0;
    std::printf("PART flag-host us=%.2f\n", median_us(reps, [&] {
                  ++v;
                  rt->wait_flag(s, flag, v);
                  rt->record(e, s);
                  __atomic_store_n(flag, v, __ATOMIC_RELEASE);
                  spin_done(*rt, e);
                }));
    std::printf("PART flag-gpu us=%.2f\n", median_us(reps, [&] {
                  ++v;
                  rt->wait_flag(s, flag, v);
                  rt->record(e, s);
                  rt->write_flag(s2, flag, v);
                  spin_done(*rt, e);
                }));
  }
  std::printf("PART pin-64KiB us=%.2f\n", median_us(20, [&] { rt->free_host(rt->alloc_host(64 << 10)); }));
  std::printf("PART pin-64MiB us=%.2f\n", median_us(5, [&] { rt->free_host(rt->alloc_host(64 << 20)); }));

  // A whole operation, in a group of one (no peer: what the staging itself costs).
  auto pg = ProcessGroup::create(make_hash_store(), 0, 1);
  AllreduceOptions o;
  o.stream = s;
  auto* d = reinterpret_cast<float*>(dev);
  for (int warm = 0; warm < 20; ++warm) pg->allreduce(Buffer(d, 2, DataType::float32, Device::cuda(0)), o)->wait();
  rt->synchronize(s);
  std::printf("PART allreduce-8B-1rank us=%.2f\n", median_us(reps, [&] {
                pg->allreduce(Buffer(d, 2, DataType::float32, Device::cuda(0)), o)->wait();
                rt->synchronize(s);
              }));
  std::printf("PART allreduce-8B-1rank-synchronize us=%.2f\n", median_us(reps, [&] {
                pg->allreduce(Buffer(d, 2, DataType::float32, Device::cuda(0)), o)->synchronize();
              }));
  pg->shutdown();
  return 0;
}
