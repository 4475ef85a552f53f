// Scenario "device": DistributedDataParallel over device buffers (DdpOptions::device/stream).
// Every rank runs the same steps twice, once with the gradients in host memory (the reference:
// the host reducer) and once in device memory of the device runtime (the host stand-in in CI,
// KOLO_DEVICE_STANDIN=1; CUDA on a GPU machine), and every element of the averaged gradients
// must be bitwise equal, tail elements outside every parameter untouched. The steps cover the
// parameter broadcast, marks in backward and forward order, finish() marking everything,
// no_sync accumulation, and the refusals (compression, sharding) on device buffers.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/device_runtime.hpp"
#include "test_model.hpp"
#include "worker.hpp"

namespace kolo::ddptest {
namespace {

constexpr float kTail = 1000.0f;

// Device memory of `count` floats, freed on scope exit; filled and read through the runtime on
// the scenario's stream (device memory is not host-addressable on a GPU).
class DeviceFloats {
 public:
  DeviceFloats(kernels::DeviceRuntime& rt, size_t count)
      : rt_(rt), count_(count), ptr_(static_cast<float*>(rt.alloc_device(count * sizeof(float)))) {}
  ~DeviceFloats() { rt_.free_device(ptr_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return ptr_; }
  void upload(const std::vector<float>& host, void* stream) {
    rt_.copy(ptr_, host.data(), count_ * sizeof(float), stream);
    rt_.synchronize(stream);  // `host` may change right after
  }
  std::vector<float> download(void* stream) {
    std::vector<float> host(count_);
    rt_.copy(host.data(), ptr_, count_ * sizeof(float), stream);
    rt_.synchronize(stream);
    return host;
  }

 private:
  kernels::DeviceRuntime& rt_;
  size_t count_;
  float* ptr_;
};

// This rank's gradients for one step, as backward would leave them: `steps` accumulated, the
// tail marked with a rank-specific value.
std::vector<float> local_grads(const std::vector<uint8_t>& covered, int rank, const std::vector<int>& steps) {
  std::vector<float> g(covered.size(), 0.0f);
  for (size_t i = 0; i < g.size(); ++i) {
    if (!covered[i]) {
      g[i] = kTail + static_cast<float>(rank);
      continue;
    }
    for (int s : steps) g[i] += smooth_grad(rank, i, s) + exact_grad(rank, i, s);
  }
  return g;
}

// Overwrites `dst` in place: the host reducer keeps its data() pointer.
void refill(std::vector<float>& dst, const std::vector<float>& src) { std::copy(src.begin(), src.end(), dst.begin()); }

size_t count_differences(Worker& w, const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && ++wrong <= 3)
      w.expect(false, std::string(what) + ": element " + std::to_string(i) + " = " + std::to_string(got[i]) +
                          " on the device, " + std::to_string(want[i]) + " with host buffers");
  w.expect(wrong == 0, std::string(what) + ": " + std::to_string(wrong) + " of " + std::to_string(want.size()) +
                           " elements differ from the host reducer's");
  return wrong;
}

template <class Reducer>
bool refused(Worker& w, kernels::DeviceRuntime& rt, DdpOptions opts, size_t total, const std::vector<DdpParam>& layout,
             const std::string& needle) {
  DeviceFloats params(rt, total), grads(rt, total);
  try {
    Reducer r(w.group, params.get(), grads.get(), total, layout, opts);
  } catch (const InvalidArgument& e) {
    const bool named = std::string(e.what()).find(needle) != std::string::npos;
    w.expect(named, std::string("the refusal does not say '") + needle + "': " + e.what());
    return true;
  }
  return false;
}

}  // namespace

void scenario_device(Worker& w) {
  kernels::DeviceRuntime* rt = kernels::device_runtime();
  if (rt == nullptr || rt->device_count() == 0)
    throw Error("scenario device: no device runtime (set KOLO_DEVICE_STANDIN=1 without a GPU)" +
                std::string(rt ? ": " + rt->unavailable_reason() : ""));
  const char* local = std::getenv("LOCAL_RANK");
  const int device = (local ? std::atoi(local) : w.rank) % rt->device_count();
  rt->set_device(device);
  void* stream = rt->create_stream();
  w.say(std::string("device runtime: ") + rt->name() + ", device " + std::to_string(device));

  const ProcessGroup& g = *w.group;
  const std::vector<DdpParam> layout = model_layout();
  const size_t total = model_total(layout);
  const std::vector<uint8_t> covered = covered_elements(layout, total);
  DdpOptions host_opts = model_options();
  DdpOptions dev_opts = host_opts;
  dev_opts.device = Device::cuda(device);
  dev_opts.stream = stream;

  std::vector<float> host_params(total), host_grads(total);
  for (size_t i = 0; i < total; ++i) host_params[i] = initial_param(g.rank(), i);
  DeviceFloats dev_params(rt[0], total), dev_grads(rt[0], total);
  dev_params.upload(host_params, stream);
  {
    DistributedDataParallel host(w.group, host_params.data(), host_grads.data(), total, layout, host_opts);
    DistributedDataParallel dev(w.group, dev_params.get(), dev_grads.get(), total, layout, dev_opts);

    w.begin("params broadcast from rank 0 into device memory");
    count_differences(w, dev_params.download(stream), host_params, "params");
    size_t not_rank0 = 0;
    for (size_t i = 0; i < total; ++i) not_rank0 += host_params[i] != initial_param(0, i);
    w.expect(not_rank0 == 0, "the host reference did not broadcast rank 0's params");

    const size_t n = layout.size();
    std::vector<size_t> backward(n), forward(n);
    for (size_t i = 0; i < n; ++i) forward[i] = i, backward[i] = n - 1 - i;
    struct Step {
      const char* name;
      const std::vector<size_t>* order;  // null: finish() marks everything
    };
    const Step steps[] = {{"backward order", &backward}, {"forward order", &forward}, {"no marks", nullptr}};
    int step = 0;
    std::vector<float> staged(total);  // the late upload's source, untouched until the stream has read it
    for (const Step& s : steps) {
      w.begin(std::string("device buckets, ") + s.name);
      staged = local_grads(covered, g.rank(), {step});
      refill(host_grads, staged);
      // As in training, the marks come while the gradients are still being produced on the
      // stream: 30 ms of stream work, then their copy. The buckets must wait for it (a bucket
      // sent as host memory, or not ordered on the stream, would carry the previous values).
      rt->host_fn(stream, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
      rt->copy(dev_grads.get(), staged.data(), total * sizeof(float), stream);
      for (DistributedDataParallel* r : {&dev, &host}) {
        if (s.order != nullptr)
          for (size_t p : *s.order) r->mark_grad_ready(p);
        r->finish();
      }
      w.expect(dev.last_step_stats().buckets == dev.bucket_count(), "device step stats count no buckets");
      count_differences(w, dev_grads.download(stream), host_grads, s.name);
      // The tail is outside every bucket: still this rank's marker on both.
      w.expect(host_grads.back() == kTail + static_cast<float>(g.rank()), "the host reducer wrote the tail");
      ++step;
    }

    w.begin("device buckets, no_sync then a synced step");
    refill(host_grads, local_grads(covered, g.rank(), {step, step + 1}));
    dev_grads.upload(host_grads, stream);
    for (DistributedDataParallel* r : {&host, &dev}) {
      {
        auto local_only = r->no_sync();
        for (size_t p = n; p-- > 0;) r->mark_grad_ready(p);
        r->finish();
      }
      w.expect(r->last_step_stats().buckets == 0, "a no_sync step communicated");
    }
    count_differences(w, dev_grads.download(stream), host_grads, "inside no_sync (this rank's own sums)");
    refill(host_grads, local_grads(covered, g.rank(), {step, step + 1, step + 2}));
    dev_grads.upload(host_grads, stream);
    for (DistributedDataParallel* r : {&host, &dev}) {
      for (size_t p = n; p-- > 0;) r->mark_grad_ready(p);
      r->finish();
    }
    count_differences(w, dev_grads.download(stream), host_grads, "after no_sync");
    // And the reference itself is the mean over ranks (so agreeing with it means something).
    std::vector<std::vector<float>> every_rank;
    for (int r = 0; r < g.size(); ++r) every_rank.push_back(local_grads(covered, r, {step, step + 1, step + 2}));
    size_t wrong = 0;
    for (size_t i = 0; i < total; ++i) {
      if (!covered[i]) continue;
      double sum = 0;
      for (const std::vector<float>& theirs : every_rank) sum += theirs[i];
      const float mean = static_cast<float>(sum / g.size());
      wrong += std::abs(host_grads[i] - mean) > 1e-5f * (1 + std::abs(mean));
    }
    w.expect(wrong == 0, std::to_string(wrong) + " host-reducer averages are not the mean over ranks");
  }

  w.begin("device buffers with compression or sharding are refused");
  DdpOptions fp16 = dev_opts;
  fp16.compression = GradCompression::float16;
  w.expect(refused<DistributedDataParallel>(w, *rt, fp16, total, layout, "compression (float16) needs host buffers"),
           "float16 compression of device buffers was accepted");
  w.expect(refused<ShardedDataParallel>(w, *rt, dev_opts, total, layout, "ShardedDataParallel needs host buffers"),
           "ShardedDataParallel over device buffers was accepted");
  rt->destroy_stream(stream);
}

}  // namespace kolo::ddptest
