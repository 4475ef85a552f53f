// The one parser of byte counts with a K/M/G suffix (powers of 1024, either case), shared by
// KOLO_* variables (config.cpp), the benchmarks' -b/-e/-i (bench/common/sizes.cpp) and the CUDA
// kernel bench, so "64M" means the same everywhere. Header-only and dependency-free: the peer
// benchmarks include it without linking any kolo code.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace kolo::common {

// Digits, optionally a fraction when allow_fraction ("1.5K" = 1536, as nccl-tests' parsesize
// reads it; the result rounds down), then an optional K, M or G. nullopt for anything else,
// for an empty string and for a value that does not fit 64 bits.
inline std::optional<uint64_t> parse_byte_size(std::string_view text, bool allow_fraction = false) {
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': multiplier = uint64_t{1} << 10; break;
      case 'M': case 'm': multiplier = uint64_t{1} << 20; break;
      case 'G': case 'g': multiplier = uint64_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && (!allow_fraction || fraction.empty()))) return std::nullopt;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t value = 0;
  for (const char c : whole) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (kMax - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value > kMax / multiplier) return std::nullopt;
  value *= multiplier;
  // The fraction's share of the multiplier, in integers: digits past the ninth are checked but
  // too small to matter (multiplier <= 2^30), and 9 digits keep the product within 64 bits.
  uint64_t numerator = 0;
  uint64_t denominator = 1;
  for (const char c : fraction) {
    if (c < '0' || c > '9') return std::nullopt;
    if (denominator < 1000000000) {
      numerator = numerator * 10 + static_cast<uint64_t>(c - '0');
      denominator *= 10;
    }
  }
  const uint64_t extra = numerator * multiplier / denominator;
  if (value > kMax - extra) return std::nullopt;
  return value + extra;
}

}  // namespace kolo::common
