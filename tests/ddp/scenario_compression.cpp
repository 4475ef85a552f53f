// Scenarios "compression" and "sharded-compression": with the float16 / bfloat16 hooks, gradients
// after finish() are within the 16-bit format's rounding of the exact mean, and every value is
// one the format can hold (proof that the bucket really travelled compressed: the inputs are not
// representable). For ShardedDataParallel, the elements of the rank's shard.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "test_model.hpp"
#include "worker.hpp"

namespace kolo::ddptest {
namespace {

bool representable_in_bfloat16(float x) { return (std::bit_cast<uint32_t>(x) & 0xFFFFu) == 0; }

bool representable_in_float16(float x) {
  if (x == 0.0f) return true;
  if (!std::isfinite(x) || std::fabs(x) > 65504.0f) return false;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| = m * 2^exponent, 0.5 <= m < 1
  // 11 significant bits for normal values (|x| >= 2^-14), fixed steps of 2^-24 below.
  const int scale = exponent - 1 >= -14 ? 11 - exponent : 24;
  const double scaled = std::ldexp(static_cast<double>(x), scale);
  return scaled == std::trunc(scaled);
}

// The elements a reducer leaves averaged: all (DDP), or the shard's (ShardedDataParallel).
std::vector<uint8_t> averaged(const DistributedDataParallel&, std::vector<uint8_t> covered) { return covered; }
std::vector<uint8_t> averaged(const ShardedDataParallel& zero, const std::vector<uint8_t>& covered) {
  std::vector<uint8_t> mine(covered.size(), 0);
  for (const ShardRange& s : zero.shard())
    for (size_t i = s.offset; i < s.offset + s.count; ++i) mine[i] = covered[i];
  return mine;
}

template <class Reducer>
void check_hook(Worker& w, GradCompression c) {
  const bool half = c == GradCompression::float16;
  w.begin(half ? "float16 hook" : "bfloat16 hook");
  const std::vector<DdpParam> layout = model_layout();
  const size_t total = model_total(layout);
  const std::vector<uint8_t> covered = covered_elements(layout, total);
  std::vector<float> params(total, 0.0f), grads(total, 0.0f);
  DdpOptions o = model_options();
  o.compression = c;
  Reducer ddp(w.group, params.data(), grads.data(), total, layout, o);
  const std::vector<uint8_t> checked = averaged(ddp, covered);
  const int world = w.group->size();
  const int rank = w.group->rank();
  // Unit roundoff: float16 keeps 11 significant bits, bfloat16 8. Each rank's value is rounded
  // once when packed, each partial sum once per reduction step, the mean once more.
  const double unit = half ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < total; ++i) grads[i] = covered[i] ? smooth_grad(rank, i, step) : 0.0f;
    for (size_t p = layout.size(); p-- > 0;) ddp.mark_grad_ready(p);
    ddp.finish();
    size_t far = 0, unrepresentable = 0;
    for (size_t i = 0; i < total; ++i) {
      if (!checked[i]) continue;
      double sum = 0, largest = 0;
      for (int r = 0; r < world; ++r) {
        sum += smooth_grad(r, i, step);
        largest = std::max(largest, std::fabs(static_cast<double>(smooth_grad(r, i, step))));
      }
      const double mean = sum / world;
      const double tolerance = (world + 2) * unit * largest + std::ldexp(1.0, -24);
      if (std::fabs(grads[i] - mean) > tolerance && ++far <= 3)
        w.expect(false, "grads[" + std::to_string(i) + "] = " + std::to_string(grads[i]) + ", exact mean " +
                            std::to_string(mean) + ", tolerance " + std::to_string(tolerance));
      unrepresentable += half ? !representable_in_float16(grads[i]) : !representable_in_bfloat16(grads[i]);
    }
    w.expect(far == 0, std::to_string(far) + " elements outside the tolerance");
    w.expect(unrepresentable == 0,
             std::to_string(unrepresentable) + " results are not 16-bit values: the bucket did not travel compressed");
    size_t bytes = 0;
    for (const DdpBucket& b : ddp.buckets()) bytes += b.count * 2;
    w.expect(ddp.last_step_stats().bytes == bytes, "stats.bytes = " + std::to_string(ddp.last_step_stats().bytes) +
                                                       ", expected " + std::to_string(bytes) + " (2 bytes per element)");
  }
}

}  // namespace

void scenario_compression(Worker& w) {
  check_hook<DistributedDataParallel>(w, GradCompression::float16);
  check_hook<DistributedDataParallel>(w, GradCompression::bfloat16);
}

void scenario_sharded_compression(Worker& w) {
  check_hook<ShardedDataParallel>(w, GradCompression::float16);
  check_hook<ShardedDataParallel>(w, GradCompression::bfloat16);
}

}  // namespace kolo::ddptest
