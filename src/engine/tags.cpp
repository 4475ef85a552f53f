#include "engine/tags.hpp"

#include "algorithms/algorithm.hpp"

namespace kolo::engine {

Stamp decode(const transport::Tag& t) {
  Stamp s;
  s.seq = t.w[0] & kSeqMask;
  s.group = static_cast<uint16_t>(t.w[0] >> 48);
  s.count = t.w[1];
  s.kind = static_cast<algo::CollKind>(t.w[2] & 0xff);
  s.dtype = static_cast<DataType>((t.w[2] >> 8) & 0xff);
  s.op = static_cast<ReduceKind>((t.w[2] >> 16) & 0xff);
  s.algo_id = static_cast<uint8_t>((t.w[2] >> 24) & 0xff);
  s.root_or_tag = static_cast<uint32_t>(t.w[2] >> 32);
  return s;
}

std::string describe(const Stamp& s, const std::string& group_name) {
  int k = static_cast<int>(s.kind);
  if (k >= algo::kNumCollKinds) return "an unrecognised message";
  std::string out = std::string(algo::coll_name(s.kind)) + " #" + std::to_string(s.seq) + " (count " + std::to_string(s.count);
  if (static_cast<int>(s.dtype) < kNumDataTypes) out += std::string(", ") + dtype_name(s.dtype);
  bool p2p = s.kind == algo::CollKind::send || s.kind == algo::CollKind::recv;
  bool reduces = s.kind == algo::CollKind::allreduce || s.kind == algo::CollKind::reduce || s.kind == algo::CollKind::reduce_scatter;
  if (reduces && static_cast<int>(s.op) < kNumReduceKinds) out += std::string(", ") + reduce_name(s.op);
  out += p2p ? ", tag " + std::to_string(s.root_or_tag) : ", root " + std::to_string(s.root_or_tag);
  const algo::Algorithm* a = p2p ? nullptr : algo::algorithm_by_wire_id(s.algo_id);
  if (a != nullptr) out += std::string(", algorithm ") + a->name;
  out += ")";
  return group_name.empty() ? out : out + " of group " + group_name;
}

}  // namespace kolo::engine
