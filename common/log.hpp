// Logging, filtered by KOLO_DEBUG (level) and KOLO_DEBUG_SUBSYS (subsystems, like NCCL's
// NCCL_DEBUG_SUBSYS), to stderr or to KOLO_DEBUG_FILE (per rank: %h host, %p pid, %r rank).
// Every line says when, where and who:
//   2026-11-25T05:21:03.123456Z vm:4242:4243 kolo[rank 1] INFO COLL allreduce #7: algorithm ring ...
// Used by every layer; a disabled line costs one comparison (the subsystem of a call site is
// worked out at compile time from its file's path, see subsys_of).
#pragma once
#include <atomic>
#include <sstream>
#include <string>
#include <string_view>

namespace kolo::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

// INIT: group setup and bootstrap; COLL: collectives; P2P: send/recv; NET: the TCP transport;
// SHM: shared memory; IB: ibverbs; STORE: rendezvous stores; ENV: configuration.
enum class Subsys : int { init, coll, p2p, net, shm, ib, store, env, count };
const char* subsys_name(Subsys s);

// A call site's subsystem from its source path: transports/tcp -> NET, transports/shm -> SHM,
// transports/ibverbs -> IB, src/store -> STORE, common -> ENV, bootstrap / process_group /
// init_env -> INIT, everything else -> COLL.
constexpr bool path_has(std::string_view path, std::string_view part) { return path.find(part) != std::string_view::npos; }
constexpr Subsys subsys_of(std::string_view path) {
  if (path_has(path, "transports/tcp")) return Subsys::net;
  if (path_has(path, "transports/shm")) return Subsys::shm;
  if (path_has(path, "transports/ibverbs")) return Subsys::ib;
  if (path_has(path, "src/store")) return Subsys::store;
  if (path.starts_with("common/") || (path_has(path, "/common/") && !path_has(path, "transports/common/") &&
                                      !path_has(path, "bench/common/")))
    return Subsys::env;
  if (path_has(path, "bootstrap") || path_has(path, "process_group") || path_has(path, "init_env")) return Subsys::init;
  return Subsys::coll;
}

Level current_level();
namespace detail {
extern std::atomic<int> level_read;  // KOLO_DEBUG's level once read; -1 before
bool enabled_slow(Level l, Subsys s);
}  // namespace detail
// Inline, so that a line above the level (an INFO line on every collective's path) costs a load
// and a comparison, not a call.
inline bool enabled(Level l, Subsys s) {
  const int level = detail::level_read.load(std::memory_order_relaxed);
  if (level >= 0 && static_cast<int>(l) > level) return false;
  return detail::enabled_slow(l, s);
}
inline bool enabled(Level l) { return enabled(l, Subsys::coll); }
// The rank shown in log lines (set when this process joins its first group).
void set_process_rank(int rank);
void write(Level l, Subsys s, const std::string& msg);
inline void write(Level l, const std::string& msg) { write(l, Subsys::coll, msg); }

// For tests: forget the settings read from the environment (and close KOLO_DEBUG_FILE), so that
// the next log call reads them again.
void reset_for_tests();

}  // namespace kolo::log

#define KOLO_LOG_AT(level, subsys, expr)                                                 \
  do {                                                                                   \
    if (::kolo::log::enabled(::kolo::log::Level::level, subsys)) {                       \
      std::ostringstream kolo_log_os_;                                                   \
      kolo_log_os_ << expr;                                                              \
      ::kolo::log::write(::kolo::log::Level::level, subsys, kolo_log_os_.str());         \
    }                                                                                    \
  } while (0)

#define KOLO_LOG(level, expr)                                                            \
  do {                                                                                   \
    constexpr ::kolo::log::Subsys kolo_log_subsys_ = ::kolo::log::subsys_of(__FILE__);   \
    KOLO_LOG_AT(level, kolo_log_subsys_, expr);                                          \
  } while (0)
