// Tensors as kolo Buffers: dtype mapping, contiguous staging and the copy back of results.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "kolo/buffer.hpp"
#include "kolo/types.hpp"

namespace kolo_torch {

// The kolo type of a torch dtype, if kolo reduces it.
std::optional<kolo::DataType> kolo_dtype(at::ScalarType t);

// Throws a clear error (RuntimeError in Python) unless every tensor is a dense CPU tensor.
void check_cpu(const std::vector<at::Tensor>& ts, const char* op);
void check_cpu(const at::Tensor& t, const char* op);

// A buffer for a reducing collective: the tensor's kolo dtype, or an error naming `op`.
kolo::Buffer reduce_buffer(const at::Tensor& contiguous, const char* op);
// A buffer for a collective that only moves bytes (any dtype: bool, int16, complex, ...).
kolo::Buffer byte_buffer(const at::Tensor& contiguous);
// The buffer `op` uses for `t`: typed when kolo knows the dtype, bytes otherwise.
kolo::Buffer move_buffer(const at::Tensor& contiguous);

// Where a result lands: the user's tensor when it is contiguous, else a contiguous copy that
// copy_back() writes into the user's tensor when the operation completes.
struct Staged {
  at::Tensor user;
  at::Tensor flat;  // contiguous; the same storage as `user` when that was contiguous
  void copy_back() const {
    if (!flat.is_same(user)) user.copy_(flat);
  }
};
Staged stage(const at::Tensor& t);

// One contiguous tensor holding `ts` one after another (same dtype), and the copy back into them.
at::Tensor flatten(const std::vector<at::Tensor>& ts);
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts);

// Every tensor has the dtype and element count of the first; throws naming `op` otherwise.
void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op, const char* what);

}  // namespace kolo_torch
