// The GPU side of a device operation's Work, as Work (include/kolo/work.hpp) sees it: the
// engine's DeviceWork (device_work.hpp) implements it. Kept apart so that work.cpp needs no
// staging code.
#pragma once
#include <chrono>

namespace kolo::engine {

class DeviceCompletion {
 public:
  // Queues on `stream` a wait for the flag the copies back raise (they raise it on failure
  // too, so the stream never waits forever).
  virtual void queue_wait(void* stream) = 0;
  // The stream the operation was issued on (Options.stream).
  virtual void* issue_stream() const = 0;
  // After the host side is done: blocks until the copies back have run on the GPU.
  virtual void synchronize_gpu(std::chrono::milliseconds timeout) = 0;
  // The copies back have run (asked once the host side is done).
  virtual bool gpu_done() const = 0;

 protected:
  ~DeviceCompletion() = default;
};

}  // namespace kolo::engine
