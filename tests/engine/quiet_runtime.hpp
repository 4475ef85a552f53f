// A DeviceRuntime that does nothing and says it has one device: the base of the engine tests'
// fake runtimes, which override only what their test watches (device_direct_test.cpp,
// device_staging_test.cpp).
#pragma once
#include <functional>
#include <string>

#include "kernels/device_runtime.hpp"

namespace kolo::testing {

class QuietRuntime : public kolo::kernels::DeviceRuntime {
 public:
  const char* name() const override { return "quiet"; }
  int device_count() override { return 1; }
  std::string unavailable_reason() override { return ""; }
  int device_of(const void*) override { return 0; }
  void set_device(int) override {}
  int current_device() override { return 0; }
  void* alloc_device(size_t) override { return nullptr; }
  void free_device(void*) override {}
  void* alloc_host(size_t) override { return nullptr; }
  void free_host(void*) override {}
  void* create_stream() override { return nullptr; }
  void destroy_stream(void*) override {}
  void synchronize(void*) override {}
  void* create_event() override { return nullptr; }
  void destroy_event(void*) override {}
  void record(void*, void*) override {}
  bool done(void*) override { return true; }
  void stream_wait(void*, void*) override {}
  void copy(void*, const void*, size_t, void*) override {}
  void host_fn(void*, std::function<void()>) override {}
  void reduce(kolo::DataType, const kolo::ReduceOp&, void*, const void*, size_t, int, size_t, int, void*) override {}
  bool can_wait_on_flags() override { return true; }
  void write_flag(void*, uint32_t*, uint32_t) override {}
  void wait_flag(void*, uint32_t*, uint32_t) override {}
};

}  // namespace kolo::testing
