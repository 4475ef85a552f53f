// Byte sizes, integers and seconds on the command line, and nccl-tests' size sweep.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace kolo::bench {

// A byte count with an optional K/M/G suffix (powers of 1024, either case) and an optional
// fraction ("1.5K"), like nccl-tests' parsesize; common/byte_size.hpp does the parsing.
// Throws UsageError naming `flag`.
size_t parse_size(const std::string& text, const char* flag);

// A decimal integer in [lo, hi]. Throws UsageError naming `flag`.
long long parse_integer(const std::string& text, const std::string& flag, long long lo, long long hi);

// A finite number >= 0 (GB/s, seconds). Throws UsageError naming `flag`.
double parse_non_negative(const std::string& text, const std::string& flag);

// A positive number of seconds, fractions allowed, in milliseconds rounded up (the programs' -T).
// Throws UsageError naming `flag`.
std::chrono::milliseconds parse_seconds(const std::string& text, const std::string& flag);

// Steps `size` as nccl-tests does (times step_factor when > 1, else plus step_bytes), never
// stuck at 0 and never overflowing. Returns false once the size passes max_bytes.
bool next_size(size_t& size, size_t max_bytes, size_t step_bytes, size_t step_factor);

}  // namespace kolo::bench
