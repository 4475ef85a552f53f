// Shared by the algorithm test files: the registered names of a collective (so every
// registered algorithm is tested, including ones added later) and gtest parameter plumbing.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "algorithms/algorithm.hpp"

namespace kolo::testing {

inline std::vector<std::string> names_of(algo::CollKind kind) {
  std::vector<std::string> out;
  for (const algo::Algorithm* a : algo::all_algorithms())
    if (a->serves.has(kind)) out.push_back(a->name);
  return out;
}

inline const algo::Algorithm& algorithm(algo::CollKind kind, const std::string& name) {
  const algo::Algorithm* a = algo::find_algorithm(kind, name);
  if (a == nullptr) throw std::runtime_error("no " + std::string(algo::coll_name(kind)) + " algorithm " + name);
  return *a;
}

// Rank counts every algorithm runs on: all of 1..8 and two beyond.
inline std::vector<int> rank_counts() { return {1, 2, 3, 4, 5, 6, 7, 8, 11, 16}; }

// Element counts of the shape sweeps: empty, tiny, fewer than the ranks, not divisible.
inline std::vector<size_t> small_counts(int nranks) {
  const auto n = static_cast<size_t>(nranks);
  return {0, 1, 2, 7, n - 1, 3 * n + 1};
}

// Parameters of most suites: (algorithm name, number of ranks).
using AlgoRanks = std::tuple<std::string, int>;

// Every registered algorithm of `kind` with every rank count of rank_counts() it runs on (its
// descriptor's rank limits: "pair" only at two).
inline std::vector<AlgoRanks> algo_rank_params(algo::CollKind kind) {
  std::vector<AlgoRanks> out;
  for (const algo::Algorithm* a : algo::all_algorithms())
    if (a->serves.has(kind))
      for (int n : rank_counts())
        if (a->fits(n)) out.emplace_back(a->name, n);
  return out;
}

inline std::string algo_ranks_name(const ::testing::TestParamInfo<AlgoRanks>& info) {
  return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

}  // namespace kolo::testing
