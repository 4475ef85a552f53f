// What a collective is, seen by algorithms: its kind and its arguments after validation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>
#include "kolo/types.hpp"

namespace kolo::algo {

enum class CollKind : uint8_t {
  broadcast, allreduce, reduce, allgather, gather, scatter, reduce_scatter, alltoall, alltoallv,
  barrier, send, recv,
};
constexpr int kNumCollKinds = 12;
// Inline (a table in the enum's order): every issue names its operation.
inline const char* coll_name(CollKind k) {
  static constexpr const char* kNames[] = {"broadcast", "allreduce", "reduce", "allgather", "gather", "scatter",
                                           "reduce_scatter", "alltoall", "alltoallv", "barrier", "send", "recv"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumCollKinds, "a name for every CollKind, in order");
  const auto i = static_cast<unsigned>(k);
  return i < kNumCollKinds ? kNames[i] : "unknown collective";
}

// alltoallv's counts and displacements, in elements, one per rank.
struct VarCounts {
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
};

// Arguments as ProcessGroup received them (see include/kolo/process_group.hpp for the
// conventions); `count` is in elements and per rank as there. Validation has already happened.
struct CollArgs {
  CollKind kind = CollKind::allreduce;
  DataType dtype = DataType::float32;
  ReduceOp op;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  int root = 0;  // also the peer for send/recv
  uint32_t tag = 0;  // send/recv only
  // alltoallv only (null otherwise). Behind a plain pointer, so that the arguments are a plain
  // struct that every issue copies with a few moves: its owner (the Task, for an issued
  // operation) keeps it alive. A shared_ptr here made every copy, move and destruction of the
  // arguments of every collective test and update a control block.
  const VarCounts* v = nullptr;
  // A step of an operation on device memory (src/engine/device_issue.cpp: a reduction moves its
  // slices with allgathers, gathers and all-to-alls): the name of the caller's collective, so
  // that errors name it too. Null otherwise.
  const char* step_of = nullptr;

  size_t elem_size() const { return dtype_size(dtype); }
  size_t bytes() const { return count * elem_size(); }  // per-rank bytes
};
static_assert(std::is_trivially_copyable_v<CollArgs>, "CollArgs is copied on every issue: keep it a plain struct");

}  // namespace kolo::algo
