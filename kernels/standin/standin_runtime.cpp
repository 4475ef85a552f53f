// The host stand-in for a GPU (kernels/device_runtime.hpp): "device memory" is host memory
// that alloc_device() hands out (device_of() knows it, so a buffer wrongly marked as device
// memory is caught as on CUDA), and every stream is a thread that runs its queue in order, so
// copies, events and flag waits happen asynchronously to the caller as on a GPU. It exists so
// that the engine's staging of device memory, its stream ordering and its failure paths run in
// CI, where there is no GPU (KOLO_DEVICE_STANDIN=N: N stand-in devices).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/config.hpp"
#include "common/cpu_relax.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/device_runtime.hpp"
#include "kolo/error.hpp"

namespace kolo::kernels {
namespace {

// A stream: one thread running closures in the order they were queued. Never joined: a stream
// may be stuck in a wait nobody will satisfy when the process exits (a failed peer), and the
// process must still exit.
class Stream {
 public:
  Stream() { std::thread([this] { run(); }).detach(); }
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !queue_.empty(); });
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

struct Event {
  std::atomic<uint64_t> recorded{0};   // records issued
  std::atomic<uint64_t> completed{0};  // the last record the stream has reached
};

// Spins politely: stand-in waits last microseconds to seconds.
template <class Ready>
void spin_until(Ready ready) {
  for (int i = 0; !ready(); ++i) {
    if (i < 64)
      cpu_relax();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Every call but the plain queries checks this: an engine thread must make none.
void check_thread(const char* what) {
  if (device_calls_forbidden_here())
    throw Error(std::string("kolo internal error: device runtime call ") + what +
                " on an engine thread (they must make none: docs/ARCHITECTURE.md, \"Device memory\")");
}

class StandinRuntime final : public DeviceRuntime {
 public:
  explicit StandinRuntime(int devices) : devices_(devices) {}
  const char* name() const override { return "host stand-in"; }
  int device_count() override { return devices_; }
  std::string unavailable_reason() override { return devices_ > 0 ? "" : "KOLO_DEVICE_STANDIN=0"; }

  int device_of(const void* p) override {
    check_thread("device_of");
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lk(mu_);
    auto it = allocations_.upper_bound(a);
    if (it == allocations_.begin()) return -1;
    --it;
    return a < it->first + it->second.bytes ? it->second.device : -1;
  }
  void set_device(int device) override {
    check_thread("set_device");
    if (device < 0 || device >= devices_)
      throw InvalidArgument("stand-in device " + std::to_string(device) + " does not exist (" + std::to_string(devices_) +
                            " devices)");
    current_ = device;
  }
  int current_device() override { return current_; }

  void* alloc_device(size_t bytes) override {
    check_thread("alloc_device");
    void* p = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
    if (!p) throw Error("stand-in alloc_device: out of memory");
    std::lock_guard<std::mutex> lk(mu_);
    allocations_[reinterpret_cast<uintptr_t>(p)] = {std::max<size_t>(bytes, 1), current_};
    return p;
  }
  void free_device(void* p) override {
    check_thread("free_device");
    {
      std::lock_guard<std::mutex> lk(mu_);
      allocations_.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }
  void* alloc_host(size_t bytes) override {
    check_thread("alloc_host");
    void* p = std::aligned_alloc(4096, std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096));
    if (!p) throw Error("stand-in alloc_host: out of memory");
    return p;
  }
  void free_host(void* p) override {
    check_thread("free_host");
    std::free(p);
  }

  void* create_stream() override {  // lives as long as its thread
    check_thread("create_stream");
    return new Stream();
  }
  void destroy_stream(void*) override {}
  void synchronize(void* stream) override {
    check_thread("synchronize");
    std::promise<void> reached;
    auto f = reached.get_future();
    of(stream).push([&] { reached.set_value(); });
    f.wait();
  }
  void* create_event() override {
    check_thread("create_event");
    return new Event();
  }
  void destroy_event(void* event) override {
    check_thread("destroy_event");
    delete static_cast<Event*>(event);
  }
  void record(void* event, void* stream) override {
    check_thread("record");
    auto* e = static_cast<Event*>(event);
    const uint64_t g = e->recorded.fetch_add(1) + 1;
    of(stream).push([e, g] {
      uint64_t seen = e->completed.load();
      while (seen < g && !e->completed.compare_exchange_weak(seen, g)) {
      }
    });
  }
  bool done(void* event) override {
    check_thread("done");
    auto* e = static_cast<Event*>(event);
    return e->completed.load() >= e->recorded.load();
  }
  void stream_wait(void* stream, void* event) override {
    check_thread("stream_wait");
    auto* e = static_cast<Event*>(event);
    const uint64_t g = e->recorded.load();
    of(stream).push([e, g] { spin_until([&] { return e->completed.load() >= g; }); });
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    check_thread("copy");
    if (bytes == 0) return;
    of(stream).push([=] { std::memcpy(dst, src, bytes); });
  }
  void reduce(DataType t, const ReduceOp& op, void* dst, const void* src, size_t stride_bytes, int ways, size_t count,
              int nranks, void* stream) override {
    check_thread("reduce");
    if (count == 0) return;
    if (ways < 1) throw InvalidArgument("kolo: device reduce over " + std::to_string(ways) + " arrays");
    // The CPU kernels in the order the CUDA runtime's passes take, on the stream's thread.
    of(stream).push([=] {
      const char* in = static_cast<const char*>(src);
      if (ways == 1)
        std::memcpy(dst, in, count * dtype_size(t));
      else
        kernels::reduce(t, op.kind, dst, in, in + stride_bytes, count);
      for (int j = 2; j < ways; ++j) kernels::reduce_inplace(t, op.kind, dst, in + static_cast<size_t>(j) * stride_bytes, count);
      kernels::finalize(t, op, dst, count, nranks);
    });
  }
  void host_fn(void* stream, std::function<void()> fn) override {
    check_thread("host_fn");
    of(stream).push(std::move(fn));
  }

  bool can_wait_on_flags() override { return true; }
  void write_flag(void* stream, uint32_t* flag, uint32_t value) override {
    check_thread("write_flag");
    of(stream).push([flag, value] { std::atomic_ref<uint32_t>(*flag).store(value, std::memory_order_release); });
  }
  void wait_flag(void* stream, uint32_t* flag, uint32_t value) override {
    check_thread("wait_flag");
    of(stream).push([flag, value] {
      spin_until([&] {
        return static_cast<int32_t>(std::atomic_ref<uint32_t>(*flag).load(std::memory_order_acquire) - value) >= 0;
      });
    });
  }

 private:
  Stream& of(void* stream) { return stream ? *static_cast<Stream*>(stream) : default_stream_; }

  struct Allocation {
    size_t bytes;
    int device;
  };
  const int devices_;
  static thread_local int current_;
  Stream default_stream_;
  std::mutex mu_;
  std::map<uintptr_t, Allocation> allocations_;
};

thread_local int StandinRuntime::current_ = 0;

}  // namespace

DeviceRuntime* make_standin_runtime() {
  return new StandinRuntime(static_cast<int>(config::get_int("KOLO_DEVICE_STANDIN")));
}

}  // namespace kolo::kernels
