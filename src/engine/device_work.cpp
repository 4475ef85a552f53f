#include "engine/device_work.hpp"

#include <atomic>
#include <thread>

#include "common/cpu_relax.hpp"
#include "common/log.hpp"
#include "engine/work_access.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

namespace {
// Polls `ready` until it says yes: spins a little (a copy of a small message takes
// microseconds), then sleeps briefly between looks. False when `deadline` passes first.
template <class Ready>
bool poll_until(Ready ready, std::chrono::steady_clock::time_point deadline) {
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (i < 200) {
      cpu_relax();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    // Yielding for about the first hundred microseconds: a sleep takes at least the timer slack
    // (50 us), which a small operation would pay on each of its waits.
    if (i < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}
}  // namespace

DeviceWork::DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging,
                       void* stream, size_t n_parts)
    : Work(token, op_name, seq), parts(n_parts), staging_(std::move(staging)), rt_(staging_->rt), stream_(stream) {
  WorkAccess::set_device(*this, this);
  result_ = staging_->take_flag();
  for (Part& p : parts) {
    p.owner = this;
    p.ready_event = staging_->take_event();
    p.ready = staging_->take_flag();
    p.moved = staging_->take_flag();
  }
}

DeviceWork::~DeviceWork() {
  staging_->give_back({}, nullptr, nullptr, result_);
  for (Part& p : parts) {
    staging_->give_back({}, p.ready_event, nullptr, p.moved);  // raised before this Work could end
    // A ready flag the gate never saw may still be raised by a stream that has not got there:
    // its slot is not reused (a late raise would lower a newer operation's value).
    if (p.ready_seen || !p.needs_gate()) staging_->give_back({}, nullptr, nullptr, p.ready);
  }
}

char* DeviceWork::take_block(size_t block_bytes) {
  block_ = staging_->take_block(block_bytes);
  return block_.host;
}

void DeviceWork::queue() {
  // The issuing stream: each part's inputs into the block, then its ready flag and event.
  for (Part& p : parts) {
    if (p.ready_from_gpu) continue;
    for (const Copy& c : p.in) rt_.copy(c.host, c.device, c.bytes, stream_);
    if (p.gated) rt_.write_flag(stream_, p.ready.slot, p.ready.value);
    rt_.record(p.ready_event, stream_);
  }
  // The copy stream, in the parts' order: once a part has moved, after the issuing stream's
  // earlier work (which may still read the output buffers), its reduction on the GPU, the flag
  // that lets the engine move the reduced slices, and its outputs back; then the result.
  void* copy_stream = staging_->copy_stream;
  for (Part& p : parts) {
    if (!p.acts_after()) continue;
    if (!p.ready_from_gpu) rt_.stream_wait(copy_stream, p.ready_event);
    rt_.wait_flag(copy_stream, p.moved.slot, p.moved.value);
    const Reduction& r = p.reduce;
    if (r.ways > 0) rt_.reduce(dtype, op, r.dst, r.src, r.stride, r.ways, r.count, nranks, copy_stream);
    if (r.copy_to) rt_.copy(r.copy_to, r.dst, r.count * dtype_size(dtype), copy_stream);
    if (p.feeds != kNoPart) rt_.write_flag(copy_stream, parts[p.feeds].ready.slot, parts[p.feeds].ready.value);
    rt_.copy(p.out.device, p.out.host, p.out.bytes, copy_stream);
  }
  if (!parts.back().acts_after())  // the result must still follow every part's end
    rt_.wait_flag(copy_stream, parts.back().moved.slot, parts.back().moved.value);
  rt_.write_flag(copy_stream, result_.slot, result_.value);
  // The block is free again once the GPU is done with it: ask for it back now.
  void* block_done = staging_->take_event();
  rt_.record(block_done, copy_stream);
  staging_->give_back(block_, block_done, nullptr, {});
  block_ = {};
}

namespace {
bool reached(const uint32_t* slot, uint32_t value) {
  return static_cast<int32_t>(std::atomic_ref<const uint32_t>(*slot).load(std::memory_order_acquire) - value) >= 0;
}
}  // namespace

void DeviceWork::Part::gate(std::chrono::steady_clock::time_point deadline) {
  if (!poll_until([&] { return reached(ready.slot, ready.value); }, deadline))
    throw TimeoutError(ready_from_gpu ? "the GPU did not reduce the slices it moves within the timeout"
                                      : "the work queued on its CUDA stream before it has not finished within the "
                                        "timeout (its inputs were never copied out of device memory)");
  ready_seen = true;
}

void DeviceWork::deliver(size_t i, std::exception_ptr error) noexcept {
  std::unique_lock<std::mutex> lk(deliver_mu_);
  // The host operation wrote the block; the copy stream may read it once this is seen.
  const DeviceStaging::Flag& moved = parts[i].moved;
  std::atomic_ref<uint32_t>(*moved.slot).store(moved.value, std::memory_order_release);
  if (error && !first_error_) first_error_ = error;
  if (++delivered_ < parts.size()) return;
  std::exception_ptr outcome = first_error_;
  lk.unlock();
  WorkAccess::finish(*this, outcome);
}

void DeviceWork::queue_wait(void* stream) { rt_.wait_flag(stream, result_.slot, result_.value); }

void DeviceWork::synchronize_gpu(std::chrono::milliseconds timeout) {
  const auto deadline = timeout.count() < 0 ? std::chrono::steady_clock::time_point::max()
                                            : std::chrono::steady_clock::now() + timeout;
  if (!poll_until([&] { return reached(result_.slot, result_.value); }, deadline))
    throw TimeoutError("kolo: synchronize() gave up after " + std::to_string(timeout.count()) + " ms: " + op_name() + " #" +
                       std::to_string(seq()) + "'s copies to device memory have not run");
}

bool DeviceWork::gpu_done() const { return reached(result_.slot, result_.value); }

}  // namespace kolo::engine
