#include "engine/device_work.hpp"

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
  flag_ = staging_->take_flag();
  done_ = staging_->take_event();
  block_done_ = staging_->take_event();
  for (Part& p : parts) {
    p.owner = this;
    p.ready = staging_->take_event();
  }
}

DeviceWork::~DeviceWork() {
  staging_->give_back(block_, done_, block_done_, flag_);
  for (Part& p : parts) staging_->give_back({}, p.ready, nullptr, {});
}

char* DeviceWork::take_block(size_t block_bytes) {
  block_ = staging_->take_block(block_bytes);
  return block_.host;
}

void DeviceWork::queue_inputs() {
  for (Part& p : parts) {
    for (const Copy& c : p.in) rt_.copy(c.host, c.device, c.bytes, stream_);
    rt_.record(p.ready, stream_);
  }
}

void DeviceWork::Part::gate(std::chrono::steady_clock::time_point deadline) {
  kernels::DeviceRuntime& rt = owner->rt_;
  rt.set_device(owner->staging_->device);
  if (!poll_until([&] { return rt.done(ready); }, deadline))
    throw TimeoutError("the work queued on its CUDA stream before it has not finished within the timeout (its inputs "
                       "were never copied out of device memory)");
}

void DeviceWork::deliver(size_t i, std::exception_ptr error) noexcept {
  std::unique_lock<std::mutex> lk(deliver_mu_);
  const Part& part = parts[i];
  const bool last = ++delivered_ == parts.size();
  int caller_device = -1;  // restored below: the last part may end on the issuing thread
  try {
    caller_device = rt_.current_device();
    if (caller_device != staging_->device) rt_.set_device(staging_->device);
    if (!error && !first_error_ && part.out.bytes) {
      // After the issuing stream's earlier work, which may still read the output buffer.
      rt_.stream_wait(staging_->copy_stream, part.ready);
      rt_.copy(part.out.device, part.out.host, part.out.bytes, staging_->copy_stream);
    }
    if (last) {
      // Raised on failure too: a stream waiting for it must go on (the error surfaces at
      // synchronize(), is_completed(), exception() and the group's next call).
      if (rt_.can_wait_on_flags()) rt_.write_flag(staging_->copy_stream, flag_.slot, flag_.value);
      rt_.record(done_, staging_->copy_stream);
      rt_.record(block_done_, staging_->copy_stream);
      staging_->give_back(block_, block_done_, nullptr, {});
      block_ = {};
      block_done_ = nullptr;
    }
  } catch (const std::exception& e) {
    KOLO_LOG(error, "kolo: " << op_name() << " #" << seq() << ": copying its result to device memory failed: " << e.what());
    if (!error) error = std::make_exception_ptr(Error(std::string("kolo: ") + op_name() + " #" + std::to_string(seq()) +
                                                      ": copying the result to device memory failed: " + e.what()));
  }
  try {
    if (caller_device >= 0 && caller_device != staging_->device) rt_.set_device(caller_device);
  } catch (const std::exception&) {
  }
  if (error && !first_error_) first_error_ = error;
  if (!last) return;
  std::exception_ptr outcome = first_error_;
  lk.unlock();
  WorkAccess::finish(*this, outcome);
}

bool DeviceWork::queue_flag_wait(void* stream) {
  if (!rt_.can_wait_on_flags()) return false;
  rt_.wait_flag(stream, flag_.slot, flag_.value);
  return true;
}

void DeviceWork::queue_event_wait(void* stream) { rt_.stream_wait(stream, done_); }

void DeviceWork::synchronize_gpu(std::chrono::milliseconds timeout) {
  const auto deadline = timeout.count() < 0 ? std::chrono::steady_clock::time_point::max()
                                            : std::chrono::steady_clock::now() + timeout;
  if (!poll_until([&] { return rt_.done(done_); }, deadline))
    throw TimeoutError("kolo: synchronize() gave up after " + std::to_string(timeout.count()) + " ms: " + op_name() + " #" +
                       std::to_string(seq()) + "'s copies to device memory have not run");
}

bool DeviceWork::gpu_done() const { return rt_.done(done_); }

}  // namespace kolo::engine
