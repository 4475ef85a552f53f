// The registry: every algorithm file adds its descriptor while the library loads
// (KOLO_REGISTER_ALGORITHM), and the rest of kolo reads the list from here. Nothing here names
// an algorithm; a stamp names one by its wire id, which the descriptor fixes.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "algorithms/algorithm.hpp"

namespace kolo::algo {
namespace {

// Constructed on first use: registrations run during static initialisation, in an order the
// linker decides, so neither list may be a namespace-scope object another file could see
// unconstructed.
struct Registry {
  std::vector<const Algorithm*> list;  // in wire-id order
  std::array<const Algorithm*, 256> by_wire{};
};

Registry& registry() {
  static Registry r;
  return r;
}

[[noreturn]] void refuse(const Algorithm& a, const char* why, const Algorithm& other) {
  std::fprintf(stderr, "kolo: algorithm '%s' (wire id %u) cannot be registered: %s '%s' (wire id %u)\n", a.name,
               static_cast<unsigned>(a.wire_id), why, other.name, static_cast<unsigned>(other.wire_id));
  std::abort();
}

}  // namespace

AlgorithmRegistration::AlgorithmRegistration(const Algorithm& a) {
  Registry& r = registry();
  if (const Algorithm* other = r.by_wire[a.wire_id]) refuse(a, "its wire id is taken by", *other);
  for (const Algorithm* other : r.list)
    for (int k = 0; k < kNumCollKinds; ++k)
      if (a.serves.has(static_cast<CollKind>(k)) && other->serves.has(static_cast<CollKind>(k)) &&
          std::string_view(a.name) == other->name)
        refuse(a, "a collective it serves has an algorithm of that name already,", *other);
  r.by_wire[a.wire_id] = &a;
  const auto at = std::lower_bound(r.list.begin(), r.list.end(), &a,
                                   [](const Algorithm* x, const Algorithm* y) { return x->wire_id < y->wire_id; });
  r.list.insert(at, &a);
}

const std::vector<const Algorithm*>& all_algorithms() { return registry().list; }

const Algorithm* algorithm_by_wire_id(uint8_t id) { return registry().by_wire[id]; }

const Algorithm* find_algorithm(CollKind kind, std::string_view name) {
  for (const Algorithm* a : registry().list)
    if (a->serves.has(kind) && name == a->name) return a;
  return nullptr;
}

}  // namespace kolo::algo
