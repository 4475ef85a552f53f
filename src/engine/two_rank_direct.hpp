// The direct path's shortcut for groups of two (Executor::run_direct). At two ranks every
// algorithm that declares Algorithm::two_rank_exchange moves at most one whole message each way
// per collective (the block the peer needs) and combines what arrived in rank order (rank 0's
// block op rank 1's): the broadcast and gather/scatter trees, direct reduce, gather, scatter,
// all-gather and reduce-scatter, rd and oneshot all-reduce, rd all-gather, pairwise all-to-all
// and the dissemination barrier. This runs that exchange straight on the pair (Pair::send_now,
// recv_now) with no Comm, requests or bookkeeping. The messages are the algorithm's own (its
// tag, its bytes), so the peer may run the algorithm the ordinary way.
#pragma once
#include <cstdint>

#include "algorithms/collective.hpp"
#include "engine/direct_spin.hpp"
#include "engine/scratch.hpp"
#include "transports/transport.hpp"

namespace kolo::engine {

struct TwoRankOutcome {
  bool done;      // completed: the result is in place
  uint32_t sent;  // otherwise: messages already sent (0 or 1), which the engine's run skips
};

// `a` as validated; `rank` 0 or 1; `peer` the pair to the other rank; `tag` the collective's;
// `already_sent` what an earlier attempt sent (0 or 1), not sent again.
// Local copies and the reduction happen only once the message arrived, so a collective handed
// over (not done) has changed nothing but what it sent.
TwoRankOutcome run_two_rank(const algo::CollArgs& a, int rank, transport::Pair& peer, const transport::Tag& tag,
                            Scratch& scratch, DirectSpin& spin, uint32_t already_sent);

}  // namespace kolo::engine
