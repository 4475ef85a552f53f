// Helpers every store implementation shares: deadlines, the integer encoding of add() counters,
// compare_set's rule, and the wording of timeout errors (so all stores fail the same way).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::store_detail {

using Clock = std::chrono::steady_clock;

// now + timeout, clamped so that huge timeouts cannot overflow the clock; negative means now.
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

// Milliseconds left until `deadline` (0 once it has passed), rounded up so we never spin.
std::chrono::milliseconds remaining(Clock::time_point deadline);

// add() keeps counters as decimal text (like c10d), so get() of a counter returns e.g. "42".
// Throws InvalidArgument naming `key` when the stored value is not such a number.
int64_t parse_counter(const std::string& key, const Bytes& value);
// current + delta, or InvalidArgument naming `key` when the sum leaves int64 (a fuzzer's find:
// signed overflow is undefined behaviour, not a wrap).
int64_t add_to_counter(const std::string& key, int64_t current, int64_t delta);
Bytes format_counter(int64_t value);

// compare_set's decision. `current` is nullopt when the key is absent. Returns the value to store,
// or nullopt to leave the key as it is.
std::optional<Bytes> compare_set_decision(const std::optional<Bytes>& current, const Bytes& expected,
                                          const Bytes& desired);

// "a, b, c" (keys quoted), for error messages.
std::string join_keys(const std::vector<std::string>& keys);

[[noreturn]] void throw_wait_timeout(const std::string& store_name, const std::vector<std::string>& missing,
                                     std::chrono::milliseconds timeout);

}  // namespace kolo::store_detail
