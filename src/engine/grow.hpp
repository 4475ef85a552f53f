// ProcessGroup::grow and ProcessGroup::join's agreement: which waiting processes a running group
// lets in, and at which ranks. Through the store only (the joiners have no connection to anyone
// yet), under one namespace per line of groups (a root and every generation shrunk or grown
// from it), "<root>/join":
//   tickets   a counter: a joiner takes the next number (store.add), so joiners queue in the
//             order they arrived, and each number is used once
//   <t>       joiner t's state, the one key that decides its fate:
//               "waiting"                      written by the joiner once it holds ticket t
//               "withdrawn"                    the joiner gave up (its compare_set from "waiting")
//               "admitted <G> <rank> <round>"  the decider's compare_set from "waiting"
//             Both sides move it only from "waiting", so a joiner is never admitted after it
//             left (its timeout), nor leaves after it was admitted: the first compare_set wins
//   closed    the line's last group was shut down ("generation G"): a waiting joiner stops at
//             once instead of waiting out its timeout
// and per admission (round = its first ticket, so unique) "<root>/grow<round>/size", the new
// group's size, written once (compare_set) after every claim of the round: a joiner reads its
// rank from its own key, the size from this one.
// Who decides: the group's lowest member (rank 0) alone, inside grow(); the other members learn
// the outcome from a broadcast on the group being grown (grow is collective over it, and the
// broadcast is far cheaper than every member polling the store). There is no takeover: should
// rank 0 die while deciding, the broadcast fails on every member (the group's failure, to be met
// with shrink), and a joiner it claimed times out waiting for the size key or the connect.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::engine {

// The decider's side (rank 0 of the group being grown).
struct AdmitRequest {
  std::string ns;          // "<root>/join"
  std::string group;       // the group's name, for messages
  int generation = 1;      // of the grown group
  int members = 1;         // the group's size: joiners get ranks members, members+1, ...
  int max_joiners = 0;     // 0: every joiner waiting
  // Until when to wait for a first joiner when none is waiting (now or earlier: decide at once).
  std::chrono::steady_clock::time_point wait_until;
};

struct Admission {
  int64_t round = 0;             // 0: nobody admitted
  std::vector<int64_t> tickets;  // ticket i gets rank members + i
  int size = 0;                  // of the grown group (members when nobody was admitted)
};

// Claims the waiting joiners in ticket order (up to max_joiners), then publishes the size.
// `next_ticket` is the first ticket this process has not yet seen settled (admitted or
// withdrawn); it moves past those, so that a check with nobody waiting costs one store call
// (the counter's value). Throws what the store throws.
Admission admit_joiners(Store& store, const AdmitRequest& req, int64_t& next_ticket);

// The joiner's side.
struct JoinRequest {
  std::string ns;     // "<root>/join"
  std::string group;  // the line's root name, for messages
  std::chrono::steady_clock::time_point deadline;
};

struct Admitted {
  int64_t ticket = 0, round = 0;
  int generation = 0, rank = 0, size = 0;
};

// Takes a ticket and waits (polling, 1 ms doubling to 20 ms) until a member admits it. Throws
// TimeoutError when nobody did by the deadline (after withdrawing, unless it was admitted in the
// meantime: then it is admitted after all), ExcludedError naming the last generation when the
// line was closed before it was admitted, and what the store throws.
Admitted wait_for_admission(Store& store, const JoinRequest& req);

// Marks the line closed (its last group is being shut down): waiting joiners stop.
void close_line(Store& store, const std::string& ns, int generation);

// "admitted 2 3 7" and back (nullopt-like: rank -1 when malformed).
std::string encode_admission(int generation, int rank, int64_t round);
bool decode_admission(const std::string& text, int& generation, int& rank, int64_t& round);

}  // namespace kolo::engine
