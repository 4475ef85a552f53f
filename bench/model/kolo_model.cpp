// kolo-model: what the cost model (src/algorithms/cost_model.hpp) predicts, and what selection
// picks, for a group of HOSTS hosts x PER ranks, per size. The model's parameters come from the
// same tunables a group reads (KOLO_MODEL_SHM, KOLO_MODEL_NET, KOLO_MODEL_REDUCE_GBPS,
// KOLO_CHUNK_BYTES), so bench/model/fit.py sets them in the environment and calls this: the
// numbers it compares with measurements come from the library's own formulas, not a copy.
//   kolo-model COLLECTIVE HOSTS PER MIN MAX FACTOR
// prints "bytes algorithm predicted_us" per algorithm that has a formula, then
// "bytes selected NAME" (the choice KOLO_SELECT=model makes).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_model.hpp"
#include "common/byte_size.hpp"

using namespace kolo::algo;

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: kolo-model COLLECTIVE HOSTS PER MIN MAX FACTOR\n");
    return 2;
  }
  int kind_index = -1;
  for (int k = 0; k < kNumCollKinds; ++k)
    if (std::strcmp(argv[1], coll_name(static_cast<CollKind>(k))) == 0) kind_index = k;
  const auto min = kolo::common::parse_byte_size(argv[4]), max = kolo::common::parse_byte_size(argv[5]);
  const int hosts = std::atoi(argv[2]), per = std::atoi(argv[3]), factor = std::atoi(argv[6]);
  if (kind_index < 0 || hosts < 1 || per < 1 || !min || !max || *min < 1 || factor < 2) {
    std::fprintf(stderr, "kolo-model: bad arguments (collective as coll_name(), sizes with K/M/G, factor >= 2)\n");
    return 2;
  }
  const auto kind = static_cast<CollKind>(kind_index);
  std::vector<int> index;
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < per; ++i) index.push_back(h);
  const HostLayout layout = HostLayout::from_indices(index);
  SelectionTunables t = SelectionTunables::from_config();
  t.use_model = true;
  t.algo.clear();
  const GroupShape shape = GroupShape::of(layout);
  for (uint64_t bytes = *min; bytes <= *max; bytes *= static_cast<uint64_t>(factor)) {
    CollArgs args;
    args.kind = kind;
    args.dtype = kolo::DataType::uint8;
    args.count = bytes;
    for (const Algorithm* a : all_algorithms()) {
      if (!a->usable(args, layout)) continue;
      const double s = predict_seconds(kind, a->name, static_cast<double>(bytes), shape, t.model);
      if (s >= 0) std::printf("%llu %s %.3f\n", static_cast<unsigned long long>(bytes), a->name, s * 1e6);
    }
    std::printf("%llu selected %s\n", static_cast<unsigned long long>(bytes), select_algorithm(args, layout, "", t).name);
  }
  return 0;
}
