#include "tensors.hpp"

#include <c10/util/Exception.h>

#ifdef KOLO_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace kolo_torch {

std::optional<kolo::DataType> kolo_dtype(at::ScalarType t) {
  switch (t) {
    case at::kChar: return kolo::DataType::int8;
    case at::kByte: return kolo::DataType::uint8;
    case at::kInt: return kolo::DataType::int32;
    case at::kLong: return kolo::DataType::int64;
    case at::kHalf: return kolo::DataType::float16;
    case at::kBFloat16: return kolo::DataType::bfloat16;
    case at::kFloat: return kolo::DataType::float32;
    case at::kDouble: return kolo::DataType::float64;
    default: return std::nullopt;
  }
}

OpDevice op_device(std::initializer_list<c10::ArrayRef<at::Tensor>> groups, const char* op) {
  std::optional<at::Device> first;
  for (const auto& group : groups) {
    for (const auto& t : group) {
      if (!t.defined()) continue;
#ifdef KOLO_TORCH_CUDA
      TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "kolo: ", op, " takes CPU or CUDA tensors (got one on ",
                  t.device(), ")");
#else
      TORCH_CHECK(t.device().is_cpu(), "kolo: ", op, " takes CPU tensors (got one on ", t.device(), ")",
                  t.device().is_cuda() ? "; this kolo_torch was built against a torch without CUDA" : "");
#endif
      TORCH_CHECK(t.layout() == at::kStrided, "kolo: ", op, " takes dense (strided) tensors");
      if (!first) {
        first = t.device();
        continue;
      }
      TORCH_CHECK(t.device() == *first, "kolo: ", op, " takes tensors on one device (got ", *first, " and ",
                  t.device(), "): kolo does not mix host and device buffers, nor two devices, in one operation");
    }
  }
  OpDevice d;
  if (first && first->is_cuda()) {
    d.cuda = true;
    d.index = first->has_index() ? first->index() : 0;
  }
  return d;
}

void* current_stream(const OpDevice& d) {
#ifdef KOLO_TORCH_CUDA
  if (d.cuda) return c10::cuda::getCurrentCUDAStream(d.index).stream();
#endif
  (void)d;
  return nullptr;
}

namespace {
kolo::Device kolo_device_of(const at::Tensor& t) {
  if (t.is_cuda()) return kolo::Device::cuda(t.get_device());
  return kolo::Device::cpu();
}
}  // namespace

kolo::Buffer reduce_buffer(const at::Tensor& c, const char* op) {
  auto dt = kolo_dtype(c.scalar_type());
  TORCH_CHECK(dt.has_value(), "kolo: ", op, " does not reduce dtype ", c.scalar_type(),
              " (kolo reduces int8, uint8, int32, int64, float16, bfloat16, float32 and float64)");
  return kolo::Buffer(c.data_ptr(), static_cast<size_t>(c.numel()), *dt, kolo_device_of(c));
}

kolo::Buffer byte_buffer(const at::Tensor& c) {
  return kolo::Buffer(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size(), kolo::DataType::uint8,
                      kolo_device_of(c));
}

kolo::Buffer move_buffer(const at::Tensor& c) {
  auto dt = kolo_dtype(c.scalar_type());
  if (!dt) return byte_buffer(c);
  return kolo::Buffer(c.data_ptr(), static_cast<size_t>(c.numel()), *dt, kolo_device_of(c));
}

Staged stage(const at::Tensor& t) {
  if (t.is_contiguous()) return {t, t};
  return {t, t.contiguous()};
}

at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t off = 0;
  for (const auto& t : ts) {
    int64_t n = t.numel();
    t.copy_(flat.narrow(0, off, n).view(t.sizes()));
    off += n;
  }
}

void check_same(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op, const char* what) {
  for (const auto& t : ts) {
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "kolo: ", op, ": ", what, " have dtype ", t.scalar_type(),
                " but the input has ", like.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "kolo: ", op, ": ", what, " have ", t.numel(),
                " elements but the input has ", like.numel());
  }
}

}  // namespace kolo_torch
