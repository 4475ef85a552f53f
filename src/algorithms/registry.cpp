// The list of every algorithm. Adding one: define `extern const Algorithm kXxx` in its own
// file and add it here. The order is part of the wire format (messages carry an algorithm's
// position in this list), so append rather than reorder.
#include "algorithms/algorithm.hpp"

namespace kolo::algo {

extern const Algorithm kAllreduceRing, kAllreduceTree, kAllreduceRd;
extern const Algorithm kReduceScatterRing, kReduceScatterDirect;
extern const Algorithm kAllgatherRing, kAllgatherDirect, kAllgatherRd;
extern const Algorithm kBroadcastRing, kBroadcastTree;
extern const Algorithm kReduceTree, kReduceDirect;
extern const Algorithm kGatherTree, kGatherDirect;
extern const Algorithm kScatterTree, kScatterDirect;
extern const Algorithm kAlltoallPairwise, kAlltoallvPairwise;
extern const Algorithm kBarrierDissemination;
extern const Algorithm kSendDirect, kRecvDirect;
extern const Algorithm kAllreduceTwoshot;
extern const Algorithm kAllreduceHier, kBroadcastHier, kAllgatherHier, kReduceScatterHier;
extern const Algorithm kRecvAny;
extern const Algorithm kAllreduceOneshot;
extern const Algorithm kAlltoallDirect;
extern const Algorithm kBarrierCentral;
extern const Algorithm kBroadcastDirect;

const std::vector<const Algorithm*>& all_algorithms() {
  static const std::vector<const Algorithm*> list = {
      &kAllreduceRing,     &kAllreduceTree,      &kAllreduceRd,
      &kReduceScatterRing, &kReduceScatterDirect,
      &kAllgatherRing,     &kAllgatherDirect,    &kAllgatherRd,
      &kBroadcastRing,     &kBroadcastTree,
      &kReduceTree,        &kReduceDirect,
      &kGatherTree,        &kGatherDirect,
      &kScatterTree,       &kScatterDirect,
      &kAlltoallPairwise,  &kAlltoallvPairwise,
      &kBarrierDissemination,
      &kSendDirect,        &kRecvDirect,
      &kAllreduceTwoshot,
      &kAllreduceHier,     &kBroadcastHier,      &kAllgatherHier,     &kReduceScatterHier,
      &kRecvAny,
      &kAllreduceOneshot,
      &kAlltoallDirect,
      &kBarrierCentral,
      &kBroadcastDirect,
  };
  return list;
}

const Algorithm* find_algorithm(CollKind kind, std::string_view name) {
  for (const Algorithm* a : all_algorithms())
    if (a->kind == kind && name == a->name) return a;
  return nullptr;
}

}  // namespace kolo::algo
