// The entry points of reduce.cuh and cuda_api.hpp: argument checks (all before any launch, so
// a refused call leaves the device untouched), then the launcher of the dtype's family.
// Compiled by the host compiler; the kernels themselves are in reduce_{integers,floats,halves}.cu.
#include <cstdint>
#include <string>
#include "kernels/cuda/cuda_api.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"
#include "kolo/error.hpp"

namespace kolo::kernels::cuda {
namespace {

enum class Family { integer, floating, half };

Family family_of(DataType t) {
  switch (t) {
    case DataType::float16:
    case DataType::bfloat16: return Family::half;
    case DataType::float32:
    case DataType::float64: return Family::floating;
    default: return Family::integer;
  }
}

std::string call_name(const char* caller, DataType t, ReduceKind op) {
  return std::string(caller) + "(" + dtype_name(t) + ", " + reduce_name(op) + ")";
}

// Known dtype and op (dtype_name/reduce_name throw InvalidArgument otherwise) and no bitwise
// op on a floating type. Returns the name used in later error messages.
std::string validate_kinds(const char* caller, DataType t, ReduceKind op) {
  if (static_cast<unsigned>(t) >= kNumDataTypes) {
    throw InvalidArgument(std::string(caller) + ": unknown data type " + std::to_string(static_cast<int>(t)));
  }
  if (static_cast<unsigned>(op) >= kNumReduceKinds) {
    throw InvalidArgument(std::string(caller) + ": unknown reduce op " + std::to_string(static_cast<int>(op)));
  }
  std::string name = call_name(caller, t, op);
  if (ReduceOp(op).is_bitwise() && is_floating(t)) {
    throw InvalidArgument(name + ": bitwise op '" + reduce_name(op) + "' is not defined for " + dtype_name(t));
  }
  return name;
}

void check_pointer(const std::string& name, const char* what, const void* p, DataType t) {
  if (p == nullptr) throw InvalidArgument(name + ": " + what + " is null");
  // The kernels load elements with their natural alignment (a misaligned access faults on a GPU).
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(t) != 0) {
    throw InvalidArgument(name + ": " + what + " is not aligned to the " + std::to_string(dtype_size(t)) +
                          "-byte element size");
  }
}

// An output may be exactly an input; overlapping it at another offset would make a thread read
// an element another thread already overwrote.
void check_no_partial_overlap(const std::string& name, const void* out, const void* in, size_t bytes) {
  const auto o = reinterpret_cast<uintptr_t>(out);
  const auto i = reinterpret_cast<uintptr_t>(in);
  if (o != i && o < i + bytes && i < o + bytes) {
    throw InvalidArgument(name + ": output partially overlaps an input (only exact aliasing is allowed)");
  }
}

// A clearer message than the first failing runtime call would give (cached: no cost per call).
void require_device(const std::string& name) {
  if (!cuda_available()) throw Error(name + ": no CUDA device: " + cuda_probe().error);
}

void launch(DataType t, ReduceKind op, const detail::ReduceTargets& targets, size_t count, cudaStream_t stream) {
  switch (family_of(t)) {
    case Family::integer: return detail::launch_integer_reduce(t, op, targets, count, stream);
    case Family::floating: return detail::launch_float_reduce(t, op, targets, count, stream);
    case Family::half: return detail::launch_half_reduce(t, op, targets, count, stream);
  }
}

void checked_reduce(const char* caller, DataType t, ReduceKind op, const detail::ReduceTargets& targets, size_t count,
                    cudaStream_t stream) {
  const std::string name = validate_kinds(caller, t, op);
  if (count == 0) return;
  check_pointer(name, "a", targets.a, t);
  check_pointer(name, "b", targets.b, t);
  check_pointer(name, "dst", targets.dst1, t);
  const size_t bytes = count * dtype_size(t);
  if (bytes / dtype_size(t) != count) throw InvalidArgument(name + ": count " + std::to_string(count) + " overflows");
  check_no_partial_overlap(name, targets.dst1, targets.a, bytes);
  check_no_partial_overlap(name, targets.dst1, targets.b, bytes);
  if (targets.dst2 != nullptr) {
    check_pointer(name, "dst2", targets.dst2, t);
    check_no_partial_overlap(name, targets.dst2, targets.a, bytes);
    check_no_partial_overlap(name, targets.dst2, targets.b, bytes);
    check_no_partial_overlap(name, targets.dst2, targets.dst1, bytes);
  }
  require_device(name);
  launch(t, op, targets, count, stream);
}

}  // namespace

void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  checked_reduce("cuda::reduce", t, op, {dst, nullptr, a, b}, count, stream);
}

void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count, cudaStream_t stream) {
  checked_reduce("cuda::reduce_inplace", t, op, {dst, nullptr, dst, src}, count, stream);
}

void reduce_copy2(DataType t, ReduceKind op, void* dst1, void* dst2, const void* a, const void* b, size_t count,
                  cudaStream_t stream) {
  if (dst2 == nullptr && count != 0) {
    throw InvalidArgument(call_name("cuda::reduce_copy2", t, op) + ": dst2 is null");
  }
  checked_reduce("cuda::reduce_copy2", t, op, {dst1, dst2, a, b}, count, stream);
}

void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, cudaStream_t stream) {
  const std::string name = validate_kinds("cuda::finalize", t, op.kind);
  if (op.kind != ReduceKind::avg && op.kind != ReduceKind::premul_sum) return;
  if (op.kind == ReduceKind::avg && nranks <= 0) {
    throw InvalidArgument(name + ": nranks must be positive, got " + std::to_string(nranks));
  }
  if (count == 0) return;
  check_pointer(name, "data", data, t);
  require_device(name);
  switch (family_of(t)) {
    case Family::integer: return detail::launch_integer_finalize(t, op, data, count, nranks, stream);
    case Family::floating: return detail::launch_float_finalize(t, op, data, count, nranks, stream);
    case Family::half: return detail::launch_half_finalize(t, op, data, count, nranks, stream);
  }
}

// The overloads of cuda_api.hpp: the opaque stream is a cudaStream_t.
void reduce(DataType t, ReduceKind op, void* dst, const void* a, const void* b, size_t count, void* stream) {
  reduce(t, op, dst, a, b, count, static_cast<cudaStream_t>(stream));
}
void reduce_inplace(DataType t, ReduceKind op, void* dst, const void* src, size_t count, void* stream) {
  reduce_inplace(t, op, dst, src, count, static_cast<cudaStream_t>(stream));
}
void reduce_copy2(DataType t, ReduceKind op, void* dst1, void* dst2, const void* a, const void* b, size_t count,
                  void* stream) {
  reduce_copy2(t, op, dst1, dst2, a, b, count, static_cast<cudaStream_t>(stream));
}
void finalize(DataType t, const ReduceOp& op, void* data, size_t count, int nranks, void* stream) {
  finalize(t, op, data, count, nranks, static_cast<cudaStream_t>(stream));
}

}  // namespace kolo::kernels::cuda
