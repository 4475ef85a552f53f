// An algorithm is one file defining one `const Algorithm kXxx` and one line in registry.cpp.
#pragma once
#include <string>
#include <vector>
#include "algorithms/comm.hpp"

namespace kolo::algo {

struct Algorithm {
  const char* name;   // what KOLO_ALGO / Options.algorithm say: "ring", "tree", "direct", ...
  CollKind kind;
  // Whether it can run these arguments on `nranks` ranks (null: always).
  bool (*supports)(const CollArgs& args, int nranks);
  void (*run)(Comm& comm);
};

// Every registered algorithm (registry.cpp).
const std::vector<const Algorithm*>& all_algorithms();
const Algorithm* find_algorithm(CollKind kind, const std::string& name);  // null if none
// Picks the algorithm for these arguments: `requested` (Options.algorithm, else KOLO_ALGO) when
// it names one that supports them, else the automatic choice by size and rank count (select.cpp).
const Algorithm& select_algorithm(const CollArgs& args, int nranks, const std::string& requested);

}  // namespace kolo::algo
