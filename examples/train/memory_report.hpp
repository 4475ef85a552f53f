// Per-rank memory for the end-of-training report: the bytes of AdamW state a rank holds (the
// figure --zero 1 divides by the rank count) and its peak resident set so far (getrusage).
#pragma once
#include <cstddef>
#include <string>

#include "kolo/process_group.hpp"

namespace kolo::train {

// Collective: one line per rank, "memory rank R optimizer_state_bytes B peak_rss_kb K".
std::string memory_report(ProcessGroup& group, size_t optimizer_state_bytes);

}  // namespace kolo::train
