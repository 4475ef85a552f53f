// Who to blame for a timeout. A rank whose wait for peer p times out cannot tell a dead p from a
// live p that is itself stuck waiting for the rank that really stopped; and once ranks fail,
// their transports stop carrying messages. So timed-out ranks compare notes through the group's
// rendezvous store instead: each publishes whom it waits for (one fixed key per rank, so keys
// never pile up), then follows the others' entries from p onwards to the first rank that
// publishes nothing within a grace period: the lost one. Every rank publishes before it
// follows, so ranks stuck behind one another converge on the same culprit.
//
// Nothing here runs unless a wait has already timed out. The store may live on the lost host,
// so the exchange runs on a helper thread and the caller gives up on it after the grace: a store
// that does not answer costs the grace, never a hang.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::engine {

// What a timed-out wait was for. Collective sequence numbers count group-wide, so a rank that is
// waited for in collective #k cannot be past #k; point-to-point numbers count per pair and say
// nothing about other pairs.
struct WaitFor {
  bool collective = true;
  uint64_t seq = 0;
  int peer = -1;
};

// The chain from the waited-for peer to the culprit: chain.front() is the peer this rank waited
// for, each next rank is the one the previous waits for, chain.back() published nothing.
struct Blame {
  std::vector<int> chain;
  int culprit() const { return chain.back(); }
};

// One entry's text in the store, "c17 3" (collective #17, waits for rank 3) or "p4 2", and back.
std::string encode_wait(const WaitFor& w);
std::optional<WaitFor> decode_wait(const std::string& text);

class BlameBoard {
 public:
  // `prefix` is the group's store prefix (bootstrap's); `grace` 0 turns the exchange off.
  BlameBoard(std::shared_ptr<Store> store, std::string prefix, int rank, int size, std::chrono::milliseconds grace);
  // With the grace from KOLO_BLAME_GRACE.
  static std::shared_ptr<const BlameBoard> from_config(std::shared_ptr<Store> store, std::string prefix, int rank,
                                                       int size);

  // Publishes `w` and follows the chain, for at most the grace (capped at timeout / 2). Empty when
  // the store failed or did not answer before this rank's entry was in, the chain loops back, an
  // entry does not fit the chain, or the grace is 0: the caller then names the rank it waited
  // for, as without a board. A store that fails or stops answering later ends the chain where it
  // got to: the rank there had not reported by then.
  std::optional<Blame> settle(const WaitFor& w, std::chrono::milliseconds timeout) const;

  std::string key(int rank) const;  // "<prefix>/blame/<rank>"
  std::chrono::milliseconds grace(std::chrono::milliseconds timeout) const;

 private:
  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_, size_;
  std::chrono::milliseconds grace_;
};

}  // namespace kolo::engine
