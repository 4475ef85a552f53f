// A non-owning view of typed memory: what every collective reads from and writes to.
#pragma once
#include <cstddef>
#include <type_traits>
#include "kolo/types.hpp"

namespace kolo {

struct Buffer {
  void* ptr = nullptr;
  size_t count = 0;  // elements, not bytes
  DataType dtype = DataType::float32;
  Device device = Device::cpu();

  Buffer() = default;
  Buffer(void* p, size_t n, DataType t, Device d = Device::cpu()) : ptr(p), count(n), dtype(t), device(d) {}
  template <typename T>
  Buffer(T* p, size_t n);  // dtype deduced from T, see below

  size_t bytes() const { return count * dtype_size(dtype); }
};

template <typename T> struct dtype_of;
template <> struct dtype_of<int8_t> { static constexpr DataType value = DataType::int8; };
template <> struct dtype_of<uint8_t> { static constexpr DataType value = DataType::uint8; };
template <> struct dtype_of<int32_t> { static constexpr DataType value = DataType::int32; };
template <> struct dtype_of<uint32_t> { static constexpr DataType value = DataType::uint32; };
template <> struct dtype_of<int64_t> { static constexpr DataType value = DataType::int64; };
template <> struct dtype_of<uint64_t> { static constexpr DataType value = DataType::uint64; };
template <> struct dtype_of<float> { static constexpr DataType value = DataType::float32; };
template <> struct dtype_of<double> { static constexpr DataType value = DataType::float64; };

template <typename T>
Buffer::Buffer(T* p, size_t n)
    : ptr(const_cast<void*>(static_cast<const void*>(p))), count(n), dtype(dtype_of<std::remove_const_t<T>>::value) {}

}  // namespace kolo
