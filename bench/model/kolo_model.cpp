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
#include "common/cli.hpp"

using namespace kolo::algo;

int main(int argc, char** argv) {
  // Six positional arguments, as text: checked below, as before.
  const char* const names[] = {"COLLECTIVE", "HOSTS", "PER", "MIN", "MAX", "FACTOR"};
  const char* const help_of[] = {"a collective as coll_name() spells it (allreduce, broadcast, ...)",
                                 "hosts of the group",
                                 "ranks per host",
                                 "smallest size, bytes (K/M/G suffixes)",
                                 "largest size, bytes (K/M/G suffixes)",
                                 "each size is the last one times FACTOR, >= 2"};
  std::string text[6];
  bool help = false;
  CLI::App app{"", "kolo-model"};
  kolo::cli::configure(app, "usage: kolo-model COLLECTIVE HOSTS PER MIN MAX FACTOR\n");
  app.description("What the cost model predicts per algorithm, and what selection picks, per size: lines\n"
                  "\"bytes algorithm predicted_us\", then \"bytes selected NAME\".");
  std::vector<CLI::Option*> given;
  for (int i = 0; i < 6; ++i) given.push_back(app.add_option(names[i], text[i], help_of[i])->type_name(""));
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
    for (const CLI::Option* o : given)  // required, checked here so that --help alone is not an error
      if (!help && o->count() == 0) throw CLI::ValidationError(o->get_name() + " is missing");
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-model: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    return 2;
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    return 0;
  }
  int kind_index = -1;
  for (int k = 0; k < kNumCollKinds; ++k)
    if (text[0] == coll_name(static_cast<CollKind>(k))) kind_index = k;
  const auto min = kolo::common::parse_byte_size(text[3]), max = kolo::common::parse_byte_size(text[4]);
  const int hosts = std::atoi(text[1].c_str()), per = std::atoi(text[2].c_str()), factor = std::atoi(text[5].c_str());
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
