// The correctness matrix: for one collective and one world size, every case the worker runs
// (algorithm x count x dtype x op x in-place x root). Every rank builds the same list in the
// same order, so they issue the same collectives.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kolo/types.hpp"

namespace kolo::coltest {

enum class Coll {
  broadcast, allreduce, reduce, allgather, gather, scatter, reduce_scatter, alltoall, alltoallv, barrier, sendrecv,
};

struct MatrixCase {
  Coll coll;
  std::string algorithm;  // "" = automatic
  DataType dtype = DataType::float32;
  ReduceKind op = ReduceKind::sum;  // reductions only
  size_t count = 0;       // per-rank count (alltoallv: the scale of its count matrix)
  bool in_place = false;
  int root = 0;
  std::string describe() const;
};

Coll parse_coll(const std::string& name);  // throws std::invalid_argument
const char* coll_name(Coll c);
std::vector<Coll> all_colls();
// The algorithms registered for a collective (see src/algorithms/registry.cpp), with "" first.
std::vector<std::string> algorithms_of(Coll c);
std::vector<MatrixCase> matrix_cases(Coll c, int world);

}  // namespace kolo::coltest
