// Logging to stderr, filtered by KOLO_DEBUG. Lines look like
//   kolo[rank 1] INFO allreduce #7: algorithm ring, transport tcp, 4096 bytes
// Used by every layer; cheap when the level is off.
#pragma once
#include <sstream>
#include <string>

namespace kolo::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

Level current_level();
bool enabled(Level l);
// The rank shown in log lines (set when this process joins its first group).
void set_process_rank(int rank);
void write(Level l, const std::string& msg);

}  // namespace kolo::log

#define KOLO_LOG(level, expr)                                       \
  do {                                                              \
    if (::kolo::log::enabled(::kolo::log::Level::level)) {          \
      std::ostringstream kolo_log_os_;                              \
      kolo_log_os_ << expr;                                         \
      ::kolo::log::write(::kolo::log::Level::level, kolo_log_os_.str()); \
    }                                                               \
  } while (0)
