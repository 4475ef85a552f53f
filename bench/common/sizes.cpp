#include "sizes.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "byte_size.hpp"
#include "usage_error.hpp"

namespace kolo::bench {

size_t parse_size(const std::string& text, const char* flag) {
  if (text.empty()) throw UsageError(std::string(flag) + ": empty size");
  // Fractions as nccl-tests' parsesize takes them: -b 1.5K is 1536 bytes.
  const std::optional<uint64_t> bytes = common::parse_byte_size(text, /*allow_fraction=*/true);
  if (!bytes)
    throw UsageError(std::string(flag) + ": '" + text + "' is not a size (a number with an optional K, M or G)");
  if (*bytes > std::numeric_limits<size_t>::max()) throw UsageError(std::string(flag) + ": '" + text + "' is too large");
  return static_cast<size_t>(*bytes);
}

long long parse_integer(const std::string& text, const std::string& flag, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) throw UsageError(flag + ": '" + text + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError(flag + ": " + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

double parse_non_negative(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
    throw UsageError(flag + ": '" + text + "' is not a non-negative number");
  return v;
}

std::chrono::milliseconds parse_seconds(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9)
    throw UsageError(flag + ": '" + text + "' is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

bool next_size(size_t& size, size_t max_bytes, size_t step_bytes, size_t step_factor) {
  if (step_factor > 1) {
    if (size > std::numeric_limits<size_t>::max() / step_factor) return false;
    size = std::max<size_t>(size * step_factor, 1);
  } else {
    if (size > std::numeric_limits<size_t>::max() - step_bytes) return false;
    size += step_bytes;
  }
  return size <= max_bytes;
}

}  // namespace kolo::bench
