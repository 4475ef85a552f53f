#include "store/store_common.hpp"

#include <charconv>

#include "kolo/error.hpp"

namespace kolo::store_detail {

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  // A year is "forever" for a rendezvous, and adding it to steady_clock cannot overflow.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  if (timeout < std::chrono::milliseconds(0)) timeout = std::chrono::milliseconds(0);
  if (timeout > kLongest) timeout = kLongest;
  return Clock::now() + timeout;
}

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

int64_t parse_counter(const std::string& key, const Bytes& value) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  int64_t parsed = 0;
  auto [ptr, ec] = std::from_chars(begin, end, parsed);
  if (value.empty() || ec != std::errc() || ptr != end) {
    throw InvalidArgument("store: add() on key '" + key + "' whose value '" + std::string(begin, end) +
                          "' is not a decimal integer");
  }
  return parsed;
}

int64_t add_to_counter(const std::string& key, int64_t current, int64_t delta) {
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    throw InvalidArgument("store: add(" + std::to_string(delta) + ") on key '" + key + "' holding " +
                          std::to_string(current) + " overflows a 64-bit integer");
  }
  return sum;
}

Bytes format_counter(int64_t value) {
  std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

std::optional<Bytes> compare_set_decision(const std::optional<Bytes>& current, const Bytes& expected,
                                          const Bytes& desired) {
  if (!current) {
    // An absent key only "matches" the empty expectation: that is how callers say "create it".
    if (expected.empty()) return desired;
    return std::nullopt;
  }
  if (*current == expected) return desired;
  return std::nullopt;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += "'" + keys[i] + "'";
  }
  return out;
}

void throw_wait_timeout(const std::string& store_name, const std::vector<std::string>& missing,
                        std::chrono::milliseconds timeout) {
  throw TimeoutError(store_name + ": timed out after " + std::to_string(timeout.count()) +
                     " ms waiting for keys: " + join_keys(missing));
}

}  // namespace kolo::store_detail
