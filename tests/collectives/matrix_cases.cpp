#include "matrix_cases.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "reference.hpp"
#include "test_memory.hpp"

namespace kolo::coltest {
namespace {

constexpr size_t kLargeBytes = size_t{4} << 20;  // "large": at least 4 MiB in the biggest buffer

struct CollInfo {
  Coll coll;
  const char* name;
  std::vector<std::string> algorithms;  // "" (automatic) first
};

const std::vector<CollInfo>& infos() {
  static const std::vector<CollInfo> table = {
      {Coll::broadcast, "broadcast", {"", "ring", "tree", "direct"}},
      {Coll::allreduce, "allreduce", {"", "ring", "tree", "rd"}},
      {Coll::reduce, "reduce", {"", "tree", "direct"}},
      {Coll::allgather, "allgather", {"", "ring", "direct", "rd"}},
      {Coll::gather, "gather", {"", "tree", "direct"}},
      {Coll::scatter, "scatter", {"", "tree", "direct"}},
      {Coll::reduce_scatter, "reduce_scatter", {"", "ring", "direct"}},
      {Coll::alltoall, "alltoall", {"", "pairwise", "direct"}},
      {Coll::alltoallv, "alltoallv", {"", "pairwise"}},
      {Coll::barrier, "barrier", {"", "dissemination", "central"}},
      {Coll::sendrecv, "sendrecv", {"", "direct"}},
  };
  return table;
}

const CollInfo& info(Coll c) {
  for (const CollInfo& i : infos())
    if (i.coll == c) return i;
  throw std::logic_error("unknown collective");
}

bool is_reduction(Coll c) { return c == Coll::allreduce || c == Coll::reduce || c == Coll::reduce_scatter; }
bool is_rooted(Coll c) { return c == Coll::broadcast || c == Coll::reduce || c == Coll::gather || c == Coll::scatter; }
bool has_in_place(Coll c) {
  return c != Coll::broadcast && c != Coll::alltoallv && c != Coll::barrier && c != Coll::sendrecv;
}

std::vector<DataType> all_dtypes() {
  std::vector<DataType> v;
  for (int t = 0; t < kNumDataTypes; ++t) v.push_back(static_cast<DataType>(t));
  return v;
}

std::vector<ReduceKind> valid_ops(DataType t) {
  std::vector<ReduceKind> v;
  for (int k = 0; k < kNumReduceKinds; ++k)
    if (op_valid_for(static_cast<ReduceKind>(k), t)) v.push_back(static_cast<ReduceKind>(k));
  return v;
}

std::vector<DataType> valid_dtypes(ReduceKind k) {
  std::vector<DataType> v;
  for (DataType t : all_dtypes())
    if (op_valid_for(k, t)) v.push_back(t);
  return v;
}

// The small counts every collective runs: empty, one element, fewer than the ranks, a count
// that divides by nothing, an odd thousand.
std::vector<size_t> small_counts(int world) {
  std::vector<size_t> counts{0, 1, static_cast<size_t>(world - 1), static_cast<size_t>(world * 3 + 1), 1001};
  std::vector<size_t> unique;
  for (size_t c : counts)
    if (std::find(unique.begin(), unique.end(), c) == unique.end()) unique.push_back(c);
  return unique;
}

// The per-rank count that makes the collective's biggest buffer at least kLargeBytes.
size_t large_count(Coll c, DataType t, int world) {
  const size_t elems = kLargeBytes / dtype_size(t);
  switch (c) {
    case Coll::allgather:
    case Coll::gather:
    case Coll::scatter:
    case Coll::reduce_scatter:
    case Coll::alltoall:
      return elems / static_cast<size_t>(world) + 3;
    case Coll::alltoallv:
      // The count matrix averages about scale/2 per peer (see matrix_p2p.cpp).
      return 2 * elems / static_cast<size_t>(world) + 3;
    default:
      return elems + 3;
  }
}

// (dtype, op) pairs: the whole cross product at `full`, else every dtype once and every op
// once, rotating with `turn` so different counts meet different pairs.
std::vector<std::pair<DataType, ReduceKind>> reduction_pairs(bool full, size_t turn) {
  std::vector<std::pair<DataType, ReduceKind>> pairs;
  auto add = [&](DataType t, ReduceKind k) {
    if (std::find(pairs.begin(), pairs.end(), std::make_pair(t, k)) == pairs.end()) pairs.emplace_back(t, k);
  };
  for (DataType t : all_dtypes()) {
    const auto ops = valid_ops(t);
    if (full) {
      for (ReduceKind k : ops) add(t, k);
    } else {
      add(t, ops[(static_cast<size_t>(t) + turn) % ops.size()]);
    }
  }
  if (!full) {
    for (int k = 0; k < kNumReduceKinds; ++k) {
      const auto types = valid_dtypes(static_cast<ReduceKind>(k));
      add(types[(static_cast<size_t>(k) + turn) % types.size()], static_cast<ReduceKind>(k));
    }
  }
  return pairs;
}

std::vector<int> roots_of(Coll c, int world) {
  if (!is_rooted(c) || world == 1) return {0};
  return {0, world - 1};
}

}  // namespace

std::string MatrixCase::describe() const {
  std::ostringstream s;
  s << coll_name(coll) << " algo=" << (algorithm.empty() ? "auto" : algorithm) << " dtype=" << dtype_name(dtype);
  if (is_reduction(coll)) s << " op=" << reduce_name(op);
  s << " count=" << count << (in_place ? " in-place" : " out-of-place");
  if (is_rooted(coll)) s << " root=" << root;
  return s.str();
}

Coll parse_coll(const std::string& name) {
  for (const CollInfo& i : infos())
    if (name == i.name) return i.coll;
  throw std::invalid_argument("unknown collective '" + name + "'");
}

const char* coll_name(Coll c) { return info(c).name; }

std::vector<Coll> all_colls() {
  std::vector<Coll> v;
  for (const CollInfo& i : infos()) v.push_back(i.coll);
  return v;
}

std::vector<std::string> algorithms_of(Coll c) { return info(c).algorithms; }

std::vector<MatrixCase> matrix_cases(Coll c, int world) {
  std::vector<MatrixCase> cases;
  const std::vector<size_t> counts = small_counts(world);
  const size_t full_count = static_cast<size_t>(world * 3 + 1);
  const std::vector<bool> placements = has_in_place(c) ? std::vector<bool>{false, true} : std::vector<bool>{false};
  // A reduction on device memory is moved by allgathers, gathers and all-to-alls and reduced on
  // the GPU (src/engine/device_issue.cpp): no host algorithm of its own can be named for it.
  const auto algorithms = is_reduction(c) && test_on_device() ? std::vector<std::string>{""} : algorithms_of(c);

  if (c == Coll::barrier) {
    for (const std::string& algo : algorithms) cases.push_back({c, algo});
    return cases;
  }
  if (c == Coll::sendrecv && world == 1) return cases;  // no peer to talk to

  for (size_t a = 0; a < algorithms.size(); ++a) {
    const std::string& algo = algorithms[a];
    for (int root : roots_of(c, world)) {
      for (size_t ci = 0; ci < counts.size(); ++ci) {
        const size_t count = counts[ci];
        const bool full = count == full_count || count == 1;
        if (is_reduction(c)) {
          // The whole dtype x op cross product at the awkward count, rotating pairs elsewhere.
          for (const auto& [dtype, op] : reduction_pairs(count == full_count, ci + a)) {
            for (bool in_place : placements) cases.push_back({c, algo, dtype, op, count, in_place, root});
          }
        } else {
          // Data movement: every dtype at the small awkward counts, two elsewhere.
          std::vector<DataType> types = all_dtypes();
          if (!full) types = {DataType::float32, all_dtypes()[(ci * 3 + a) % kNumDataTypes]};
          for (size_t ti = 0; ti < types.size(); ++ti) {
            if (ti > 0 && types[ti] == types[0]) continue;
            for (bool in_place : placements) cases.push_back({c, algo, types[ti], ReduceKind::sum, count, in_place, root});
          }
        }
      }
    }
    // Large: every algorithm once in float32 (sum), out of place; small worlds also run a
    // 16-bit type in place. The root alternates with the algorithm to cover both ends.
    const int root = is_rooted(c) && a % 2 == 1 ? world - 1 : 0;
    cases.push_back({c, algo, DataType::float32, ReduceKind::sum, large_count(c, DataType::float32, world), false, root});
    if (world <= 4 && has_in_place(c)) {
      const DataType t = is_reduction(c) ? DataType::bfloat16 : DataType::float16;
      cases.push_back({c, algo, t, ReduceKind::sum, large_count(c, t, world), true, root});
    }
  }
  return cases;
}

}  // namespace kolo::coltest
