// The GPU side of a device operation's Work, as Work (include/kolo/work.hpp) sees it: the
// engine's DeviceWork (device_work.hpp) implements it. Kept apart so that work.cpp needs no
// CUDA and no staging code.
#pragma once
#include <chrono>

namespace kolo {
class Work;
}

namespace kolo::engine {

class DeviceCompletion {
 public:
  // Makes `stream` wait for the result: a wait on the GPU for the flag the copies back raise,
  // or, where the GPU cannot wait on a flag, a host wait for the host side (bounded by
  // `timeout`) and then an event wait. Throws the operation's error if it is known.
  virtual void stream_wait(Work& w, void* stream, std::chrono::milliseconds timeout) = 0;
  // The stream the operation was issued on (Options.stream).
  virtual void* issue_stream() const = 0;
  // After the host side has succeeded: blocks until the copies back have run on the GPU.
  virtual void synchronize_gpu(std::chrono::milliseconds timeout) = 0;
  // The copies back have run (only asked after the host side succeeded).
  virtual bool gpu_done() const = 0;

 protected:
  ~DeviceCompletion() = default;
};

}  // namespace kolo::engine
