// A growable list in a collective's temporary memory (Comm::temp): what a per-call
// std::vector<Req> or std::vector<const void*> was, without a heap allocation per call (issue 12:
// a collective the caller waits for allocates nothing once the group is warm). Growing copies
// into a fresh, larger piece; the old one is taken back with the rest when the collective ends.
#pragma once
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

#include "algorithms/comm.hpp"

namespace kolo::algo {

template <class T>
class TempList {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  // `n` elements equal to `fill`, room for at least `reserve`.
  explicit TempList(Comm& comm, size_t n = 0, const T& fill = T{}, size_t reserve = 0) : comm_(comm) {
    grow(n > reserve ? n : reserve);
    for (size_t i = 0; i < n; ++i) data_[i] = fill;
    size_ = n;
  }
  TempList(const TempList&) = delete;
  TempList& operator=(const TempList&) = delete;

  void push_back(const T& v) {
    if (size_ == cap_) grow(cap_ == 0 ? 8 : 2 * cap_);
    data_[size_++] = v;
  }
  void clear() { size_ = 0; }
  void reserve(size_t n) { grow(n); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  operator std::span<T>() { return {data_, size_}; }             // NOLINT: used as a span
  operator std::span<const T>() const { return {data_, size_}; }  // NOLINT

 private:
  void grow(size_t cap) {
    if (cap <= cap_) return;
    T* bigger = static_cast<T*>(comm_.temp(cap * sizeof(T)));
    if (size_ > 0) std::memcpy(static_cast<void*>(bigger), data_, size_ * sizeof(T));
    data_ = bigger;
    cap_ = cap;
  }

  Comm& comm_;
  T* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

// `n` elements equal to `fill`, in the collective's temporary memory.
template <class T>
std::span<T> temp_array(Comm& comm, size_t n, const T& fill = T{}) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  T* p = static_cast<T*>(comm.temp(n * sizeof(T)));
  for (size_t i = 0; i < n; ++i) p[i] = fill;
  return {p, n};
}

}  // namespace kolo::algo
