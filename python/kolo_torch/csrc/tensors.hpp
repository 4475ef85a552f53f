// Tensors as kolo Buffers: dtype mapping, contiguous staging and the copy back of results.
// CUDA tensors are served when KOLO_TORCH_CUDA is defined (the build against a torch with
// CUDA: scripts/env/device-check.sh); without it they are refused like any non-CPU tensor.
#pragma once
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/ArrayRef.h>

#include "kolo/buffer.hpp"
#include "kolo/types.hpp"

namespace kolo_torch {

// The kolo type of a torch dtype, if kolo reduces it.
std::optional<kolo::DataType> kolo_dtype(at::ScalarType t);

// Where one operation's tensors live: all in host memory, or all on one CUDA device (kolo runs
// an operation on one device; a mix of host and device buffers it refuses).
struct OpDevice {
  bool cuda = false;
  c10::DeviceIndex index = -1;  // the CUDA device's index
};

// The device of every tensor in `groups` (an operation's inputs and outputs, undefined tensors
// skipped); throws a clear error (RuntimeError in Python) naming `op` unless all are dense and
// on the CPU or (built with KOLO_TORCH_CUDA) all on the same CUDA device.
OpDevice op_device(std::initializer_list<c10::ArrayRef<at::Tensor>> groups, const char* op);

// Orders a device operation on torch's current stream of its device (kolo's Options.stream):
// kolo starts it after the work queued there (the inputs' producers, the staging copies).
void* current_stream(const OpDevice& d);
template <typename Options>
void on_stream(Options& o, const OpDevice& d) {
  if (d.cuda) o.stream = current_stream(d);
}

// The buffers below are on the tensor's device (kolo::Device::cuda(index) for a CUDA tensor).
// A buffer for a reducing collective: the tensor's kolo dtype, or an error naming `op`.
kolo::Buffer reduce_buffer(const at::Tensor& contiguous, const char* op);
// A buffer for a collective that only moves bytes (any dtype: bool, int16, complex, ...).
kolo::Buffer byte_buffer(const at::Tensor& contiguous);
// The buffer `op` uses for `t`: typed when kolo knows the dtype, bytes otherwise.
kolo::Buffer move_buffer(const at::Tensor& contiguous);

// The buffer a rank passes where it has none (a non-root's receive buffer of reduce): empty,
// with the dtype and device of the operation's other buffer (kolo runs an operation on one device).
inline kolo::Buffer no_buffer(const kolo::Buffer& like) { return kolo::Buffer(nullptr, 0, like.dtype, like.device); }

// Where a result lands: the user's tensor when it is contiguous, else a contiguous copy that
// copy_back() writes into the user's tensor when the operation completes.
struct Staged {
  at::Tensor user;
  at::Tensor flat;  // contiguous; the same storage as `user` when that was contiguous
  // Whether the result needs copy_back() (the user's tensor is not contiguous).
  bool staged() const { return !flat.is_same(user); }
  void copy_back() const {
    if (staged()) user.copy_(flat);
  }
  // The finish step for an operation whose result is this tensor: copy_back(), or none.
  std::function<void()> finish() const {
    if (!staged()) return {};
    Staged s = *this;
    return [s] { s.copy_back(); };
  }
};
Staged stage(const at::Tensor& t);

// One contiguous tensor holding `ts` one after another (same dtype), and the copy back into them.
at::Tensor flatten(const std::vector<at::Tensor>& ts);
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts);

// Every tensor has the dtype and element count of the first; throws naming `op` otherwise.
void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op, const char* what);

}  // namespace kolo_torch
