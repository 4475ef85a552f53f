// The one non-cryptographic hash kolo uses (64-bit FNV-1a): to tell groups, jobs and layouts
// apart, never to resist an attacker (authentication does that, transports/common/auth.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kolo::common {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

// Continues a hash over `n` bytes (start from kFnvOffset).
constexpr uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

constexpr uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffset) {
  for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
  return h;
}

}  // namespace kolo::common
