// What the engine stamps on every message (the transport's opaque Tag): the collective's
// sequence number and fingerprint, so a receive that meets a message of another collective,
// another size or another algorithm fails with a clear MismatchError instead of hanging or
// reading garbage. Groups that share one set of connections (split with share_connections) are
// told apart by `group`: a message of one arriving where the other's was expected is a mismatch.
#pragma once
#include <string>

#include "algorithms/collective.hpp"
#include "transports/transport.hpp"

namespace kolo::engine {

struct Stamp {
  uint64_t seq = 0;        // collective sequence number, or the pair's point-to-point counter (48 bits)
  uint16_t group = 0;      // 0: the group that owns the connections; else a sharing subgroup's id
  algo::CollKind kind = algo::CollKind::allreduce;
  DataType dtype = DataType::float32;
  ReduceKind op = ReduceKind::sum;
  uint8_t algo_id = 0;  // the algorithm's wire id (Algorithm::wire_id)
  uint64_t count = 0;
  uint32_t root_or_tag = 0;
};

// The sequence number's bits in the tag's first word.
inline constexpr uint64_t kSeqMask = (uint64_t{1} << 48) - 1;

// Inline: every message a collective sends or expects carries it.
inline transport::Tag encode(const Stamp& s) {
  transport::Tag t;
  // A sequence number never reaches 2^48 (a collective per nanosecond for three days), so the
  // top 16 bits carry the group id.
  t.w[0] = (s.seq & kSeqMask) | static_cast<uint64_t>(s.group) << 48;
  t.w[1] = s.count;
  t.w[2] = static_cast<uint64_t>(s.kind) | static_cast<uint64_t>(s.dtype) << 8 | static_cast<uint64_t>(s.op) << 16 |
           static_cast<uint64_t>(s.algo_id) << 24 | static_cast<uint64_t>(s.root_or_tag) << 32;
  return t;
}
Stamp decode(const transport::Tag& t);
// "allreduce #7 (count 100, float32, sum, root 0, algorithm ring)"; with a group name,
// "... algorithm ring) of group default/split0.color1".
std::string describe(const Stamp& s, const std::string& group_name = "");

}  // namespace kolo::engine
