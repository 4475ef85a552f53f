// kolo-perf's backend for the shared harness (bench/common/backend.hpp): the nine collectives on
// a kolo ProcessGroup, through the public API only. Each measured column's call is prepared once
// (its Buffers and Options built before the timing), and its timed loop is the harness's
// template (bench/common/timing_loop.hpp) instantiated here with that call, so the per-call
// path is the ProcessGroup call and its wait, with nothing of the harness in between.
#pragma once
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "device_memory.hpp"
#include "elements.hpp"
#include "kolo/process_group.hpp"
#include "kolo/types.hpp"
#include "values.hpp"

namespace kolo::perf {

// The harness's element types and operators are kolo's, enumerated in kolo's order, so each
// converts by value.
namespace order {
using E = bench::ElementType;
using D = DataType;
using O = bench::RedOp;
using K = ReduceKind;
constexpr bool same(E e, D d) { return static_cast<int>(e) == static_cast<int>(d); }
constexpr bool same(O o, K k) { return static_cast<int>(o) == static_cast<int>(k); }
static_assert(same(E::int8, D::int8) && same(E::uint8, D::uint8) && same(E::int32, D::int32) &&
              same(E::uint32, D::uint32) && same(E::int64, D::int64) && same(E::uint64, D::uint64) &&
              same(E::float16, D::float16) && same(E::bfloat16, D::bfloat16) && same(E::float32, D::float32) &&
              same(E::float64, D::float64) && std::size(bench::kAllElementTypes) == kNumDataTypes);
static_assert(same(O::sum, K::sum) && same(O::prod, K::prod) && same(O::min, K::min) && same(O::max, K::max) &&
              same(O::avg, K::avg) && same(O::premul_sum, K::premul_sum) && same(O::band, K::band) &&
              same(O::bor, K::bor) && same(O::bxor, K::bxor) && std::size(bench::kAllRedOps) == kNumReduceKinds);
}  // namespace order

inline DataType to_kolo(bench::ElementType t) { return static_cast<DataType>(t); }
inline bench::ElementType from_kolo(DataType t) { return static_cast<bench::ElementType>(t); }
inline bench::RedOp from_kolo(ReduceKind k) { return static_cast<bench::RedOp>(k); }
// premul_sum with the factor the harness's values are made for.
inline ReduceOp to_kolo(bench::RedOp op) {
  const auto kind = static_cast<ReduceKind>(op);
  return kind == ReduceKind::premul_sum ? ReduceOp::premul_sum(bench::kPremulFactor) : ReduceOp(kind);
}

class KoloBackend : public bench::Backend {
 public:
  // algorithm: Options.algorithm of every measured collective ("" = automatic); library: what
  // the preamble and the JSON/CSV rows name ("kolo 0.1.0 algo auto transport auto").
  // device (-g 1, else nullptr): the harness's buffers are on device->info().index, and every
  // measured operation is issued on device->stream() and waited for on the host by
  // synchronizing that stream, as nccl-tests times a stream.
  KoloBackend(ProcessGroup& group, std::string algorithm, std::string library, bench::DeviceMemory* device = nullptr);

  int rank() const override;
  int size() const override;
  std::string library() const override { return library_; }
  void barrier() override;
  double reduce_double(double value, bench::Combine how) override;
  std::vector<char> allgather_bytes(const std::vector<char>& mine) override;
  // Like nccl-tests, in-place sendrecv (one buffer both sent from and received into while both
  // are in flight) is timed but not checked.
  bool checkable(const bench::CollectiveSpec& spec, bool in_place) const override;
  std::unique_ptr<bench::PreparedRun> prepare(const bench::RunRequest& request) override;

 private:
  ProcessGroup& group_;
  std::string algorithm_;
  std::string library_;
  bench::DeviceMemory* device_;
};

}  // namespace kolo::perf
