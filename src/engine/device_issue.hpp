// Issuing an operation on device memory (docs/ARCHITECTURE.md, "Device memory"): the checks
// that are particular to device buffers, the group's staging resources, and the translation of
// the operation into a host operation on a pinned block (device_work.hpp runs the rest).
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/collective.hpp"
#include "engine/device_direct.hpp"
#include "engine/device_work.hpp"
#include "kolo/buffer.hpp"
#include "kolo/options.hpp"

namespace kolo::engine {

// A group's device state: made at its first device operation, on that operation's device.
struct GroupDevice {
  std::mutex mu;
  int device = -1;  // the group's device: its first device operation's
  std::shared_ptr<DeviceStaging> staging;
  DirectDevice direct;  // device memory moved directly between the node's processes (device_direct.hpp)
};

// A device operation ready to be issued as host operations: its Work (what the caller gets),
// and the host operations' arguments and buffers, which point into the Work's pinned block:
// one, or one per chunk of a large all-reduce, reduce or broadcast (DeviceWork::Part).
struct HostOperation {
  algo::CollArgs args;
  Buffer send, recv;
};
struct StagedOperation {
  std::shared_ptr<DeviceWork> work;  // null: the operation uses no device memory after all
  std::vector<HostOperation> host;   // host[i] runs work->parts[i]
};

// An operation's device once checked: cpu when this rank uses only host memory in it (then
// rt is null), else its CUDA device and the runtime.
struct CheckedDevice {
  Device device;
  kernels::DeviceRuntime* rt;
};
// Refuses what device memory cannot do (no CUDA, no such device, a pointer that is not on the
// buffer's device, another device than the group's) before anything moves. Throws InvalidArgument.
CheckedDevice check_device_operation(GroupDevice& group, const algo::CollArgs& args, const Buffer& send,
                                     const Buffer& recv, int rank, int size);
// Then, for the staging path: copies the inputs out of device memory on opts.stream.
StagedOperation stage_device_operation(GroupDevice& group, const CheckedDevice& checked, const algo::CollArgs& args,
                                       const Buffer& send, const Buffer& recv, const CommonOptions& opts, int rank,
                                       int size);

// Makes `device` current on this thread for the calls made here, and restores the caller's.
struct DeviceCurrent {
  kernels::DeviceRuntime& rt;
  int previous;
  DeviceCurrent(kernels::DeviceRuntime& r, int device);
  ~DeviceCurrent();
};

}  // namespace kolo::engine
