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
    std::this_thread::sleep_for(std::chrono::microseconds(i < 1000 ? 5 : 50));
  }
}
}  // namespace

DeviceWork::DeviceWork(Work::Token token, const char* op_name, uint64_t seq, std::shared_ptr<DeviceStaging> staging,
                       void* stream)
    : Work(token, op_name, seq), staging_(std::move(staging)), rt_(staging_->rt), stream_(stream) {
  WorkAccess::set_device(*this, this);
  flag_ = staging_->take_flag();
  ready_ = staging_->take_event();
  done_ = staging_->take_event();
}

DeviceWork::~DeviceWork() { staging_->give_back(block_, ready_, done_, flag_); }

char* DeviceWork::take_block(size_t block_bytes) {
  block_ = staging_->take_block(block_bytes);
  return block_.host;
}

void DeviceWork::queue_inputs() {
  for (const Copy& c : in) rt_.copy(c.host, c.device, c.bytes, stream_);
  rt_.record(ready_, stream_);
}

void DeviceWork::gate(std::chrono::steady_clock::time_point deadline) {
  rt_.set_device(staging_->device);
  if (!poll_until([&] { return rt_.done(ready_); }, deadline))
    throw TimeoutError("the work queued on its CUDA stream before it has not finished within the timeout (its inputs "
                       "were never copied out of device memory)");
}

void DeviceWork::deliver(std::exception_ptr error) noexcept {
  try {
    rt_.set_device(staging_->device);
    if (!error && out.bytes) {
      // After the issuing stream's earlier work, which may still read the output buffer.
      rt_.stream_wait(staging_->copy_stream, ready_);
      rt_.copy(out.device, out.host, out.bytes, staging_->copy_stream);
    }
    // Raised on failure too: a stream waiting for it must go on (the error surfaces at
    // synchronize(), is_completed(), exception() and the group's next call).
    if (rt_.can_wait_on_flags()) rt_.write_flag(staging_->copy_stream, flag_.slot, flag_.value);
    rt_.record(done_, staging_->copy_stream);
  } catch (const std::exception& e) {
    KOLO_LOG(error, "kolo: " << op_name() << " #" << seq() << ": copying its result to device memory failed: " << e.what());
    if (!error) error = std::make_exception_ptr(Error(std::string("kolo: ") + op_name() + " #" + std::to_string(seq()) +
                                                      ": copying the result to device memory failed: " + e.what()));
  }
  WorkAccess::finish(*this, error);
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
