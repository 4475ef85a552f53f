#include "engine/grow.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "common/log.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr const char* kWaiting = "waiting";
constexpr const char* kWithdrawn = "withdrawn";

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }
Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string ticket_key(const std::string& ns, int64_t t) { return ns + "/" + std::to_string(t); }
std::string round_key(const std::string& ns, int64_t round) { return ns + "/round" + std::to_string(round); }
std::string closed_key(const std::string& ns) { return ns + "/closed"; }

// The generation a closed line's value names ("generation 3"), or -1.
int closed_generation(const std::string& text) {
  if (text.rfind("generation ", 0) != 0) return -1;
  try {
    return std::stoi(text.substr(11));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string encode_admission(int generation, int rank, int64_t round) {
  return "admitted " + std::to_string(generation) + " " + std::to_string(rank) + " " + std::to_string(round);
}

bool decode_admission(const std::string& text, int& generation, int& rank, int64_t& round) {
  long long g = 0, r = 0, n = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "admitted %lld %lld %lld%n", &g, &r, &n, &used) != 3 ||
      static_cast<size_t>(used) != text.size() || g < 0 || r < 0 || n < 1 || g > (1 << 30) || r > (1 << 30))
    return false;
  generation = static_cast<int>(g);
  rank = static_cast<int>(r);
  round = n;
  return true;
}

Admission admit_joiners(Store& store, const AdmitRequest& req, int64_t& next_ticket) {
  Admission out;
  out.size = req.members;
  const size_t max = req.max_joiners > 0 ? static_cast<size_t>(req.max_joiners) : SIZE_MAX;
  milliseconds pause(1);
  for (;;) {
    // One store call when nobody waits: the counter's value (add of 0 creates it at 0).
    const int64_t last = store.add(req.ns + "/tickets", 0);
    for (int64_t t = next_ticket; t <= last && out.tickets.size() < max; ++t) {
      const std::string key = ticket_key(req.ns, t);
      // Its joiner took the number but has not written "waiting" yet (microseconds): it is
      // taken next time, and so are the tickets after it, to keep arrival order.
      if (!store.check({key})) break;
      const int64_t round = out.round != 0 ? out.round : t;
      const std::string claim = encode_admission(req.generation, req.members + static_cast<int>(out.tickets.size()), round);
      const std::string now = text_of(store.compare_set(key, bytes_of(kWaiting), bytes_of(claim)));
      if (now == claim) {
        out.round = round;
        out.tickets.push_back(t);
      } else if (now != kWithdrawn) {
        int g = 0, r = 0;
        int64_t n = 0;
        if (!decode_admission(now, g, r, n))
          throw Error("kolo: grow of group " + req.group + ": the store holds a malformed joiner state '" + now +
                      "' at " + key);
        // Admitted by an earlier round (its group formed, or failed while connecting): settled.
      }
      next_ticket = t + 1;  // settled, either way
    }
    if (!out.tickets.empty() || Clock::now() >= req.wait_until) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(20));
  }
  if (out.tickets.empty()) return out;
  out.size = req.members + static_cast<int>(out.tickets.size());
  const std::string size = std::to_string(out.size);
  const std::string got = text_of(store.compare_set(round_key(req.ns, out.round), Bytes(), bytes_of(size)));
  if (got != size)
    throw Error("kolo: grow of group " + req.group + " to generation " + std::to_string(req.generation) + ": round " +
                std::to_string(out.round) + " was already decided with size '" + got + "' (two deciders?)");
  KOLO_LOG(info, "grow of group " << req.group << " to generation " << req.generation << ": admitted "
                                  << out.tickets.size() << " joiner(s), size " << out.size);
  return out;
}

Admitted wait_for_admission(Store& store, const JoinRequest& req) {
  const std::string closed = closed_key(req.ns);
  auto refuse_closed = [&](int64_t ticket) {
    const std::string v = store.get_string(closed);
    const int g = closed_generation(v);
    throw ExcludedError("kolo: join of group " + req.group + " refused: the group ended (" + v +
                            " was shut down) before admitting this process" +
                            (ticket > 0 ? " (ticket " + std::to_string(ticket) + ")" : std::string()),
                        g);
  };
  if (store.check({closed})) refuse_closed(0);
  Admitted a;
  a.ticket = store.add(req.ns + "/tickets", 1);
  const std::string key = ticket_key(req.ns, a.ticket);
  store.set(key, kWaiting);
  const std::string label = "join of group " + req.group + " (ticket " + std::to_string(a.ticket) + ")";
  KOLO_LOG(info, label << ": waiting to be admitted");

  // Leaving: withdraw, unless a member admitted us in the meantime (then we are in after all).
  auto withdraw = [&]() -> std::string { return text_of(store.compare_set(key, bytes_of(kWaiting), bytes_of(kWithdrawn))); };
  milliseconds pause(1);
  std::string state;
  for (;;) {
    state = store.get_string(key);
    if (decode_admission(state, a.generation, a.rank, a.round)) break;
    const bool is_closed = store.check({closed});
    if (is_closed || Clock::now() >= req.deadline) {
      state = withdraw();
      if (decode_admission(state, a.generation, a.rank, a.round)) break;
      if (is_closed) refuse_closed(a.ticket);
      throw TimeoutError("kolo: " + label + " timed out: no member admitted this process (members admit waiting "
                         "processes in ProcessGroup::grow, which they call together, e.g. at a step boundary; is the "
                         "group still running, under the same store and group name?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(20));
  }
  // The decider publishes the size right after its claims: microseconds, unless it died.
  const std::string size_key = round_key(req.ns, a.round);
  const auto size_deadline = std::max(req.deadline, Clock::now() + milliseconds(5000));
  pause = milliseconds(1);
  while (!store.check({size_key})) {
    if (Clock::now() >= size_deadline)
      throw TimeoutError("kolo: " + label + ": admitted to generation " + std::to_string(a.generation) + " as rank " +
                             std::to_string(a.rank) + ", but rank 0 never published the group's size (did it die?)",
                         0);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(20));
  }
  const std::string size = store.get_string(size_key);
  try {
    a.size = std::stoi(size);
  } catch (const std::exception&) {
    a.size = 0;
  }
  if (a.size <= a.rank)
    throw Error("kolo: " + label + ": the store holds a malformed group size '" + size + "' at " + size_key);
  KOLO_LOG(info, label << ": admitted as rank " << a.rank << " of " << a.size << " in generation " << a.generation);
  return a;
}

void close_line(Store& store, const std::string& ns, int generation) {
  store.set(closed_key(ns), "generation " + std::to_string(generation));
}

}  // namespace kolo::engine
