// cuda::finalize on a GPU for every dtype: avg (several rank counts, including one that does
// not fit in int8) and premul_sum (random factors, factors that saturate integers, a NaN
// factor), checked element by element against the host reference, in place on aligned and
// shifted buffers with guards; and the other ops leave the data untouched. Skipped without a
// CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include "kernels/cuda/cuda_api.hpp"
#include "tests/cuda/cuda_reference.hpp"
#include "tests/cuda/cuda_test_support.hpp"

namespace kolo::test::cuda {
namespace {

constexpr size_t kLargeCount = (size_t{1} << 20) + 3;

std::string dtype_param_name(const ::testing::TestParamInfo<DataType>& info) { return dtype_name(info.param); }

class CudaFinalizeTest : public ::testing::TestWithParam<DataType> {
 protected:
  void SetUp() override {
    KOLO_SKIP_WITHOUT_CUDA();
    rng_ = test_rng();
    stream_ = std::make_unique<Stream>();
  }
  DataType dtype() const { return GetParam(); }

  // Finalizes `count` random elements `offset` elements past an aligned boundary and checks them.
  void check_finalize(const ReduceOp& op, int nranks, size_t count, size_t offset) {
    SCOPED_TRACE(std::string(reduce_name(op.kind)) + " nranks=" + std::to_string(nranks) +
                 " factor=" + std::to_string(op.factor) + ", " + std::to_string(count) + " elements at offset " +
                 std::to_string(offset));
    const std::vector<unsigned char> x = random_elements(dtype(), count, rng_);
    std::vector<Expected> expected(count);
    parallel_chunks(count, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) expected[i] = reference_finalize(dtype(), op, element_bits(x, dtype(), i), nranks);
    });
    DeviceBuffer data(x.size(), offset * dtype_size(dtype()));
    data.upload(x.data(), stream_->get());
    kernels::cuda::finalize(dtype(), op, data.data(), count, nranks, stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(data.guards_intact()) << "a write landed outside the buffer";
    const std::vector<unsigned char> got = data.download();
    EXPECT_TRUE(all_match(
        dtype(), got, count, [&](size_t i) { return expected[i]; },
        [&](size_t i) { return "x=" + hex(element_bits(x, dtype(), i)); }));
  }

  std::mt19937_64 rng_;
  std::unique_ptr<Stream> stream_;
};

TEST_P(CudaFinalizeTest, AvgDividesByRankCount) {
  check_finalize(ReduceKind::avg, 3, 7, 0);
  check_finalize(ReduceKind::avg, 1, 8191, 1);
  check_finalize(ReduceKind::avg, 200, 8191, 0);  // 200 does not fit in int8
  const int nranks = 2 + static_cast<int>(rng_() % 1000);
  check_finalize(ReduceKind::avg, nranks, kLargeCount, 1);
  check_finalize(ReduceKind::avg, 7, 0, 0);
}

TEST_P(CudaFinalizeTest, PremulSumMultipliesByFactor) {
  std::uniform_real_distribution<double> factors(-4.0, 4.0);
  check_finalize(ReduceOp::premul_sum(factors(rng_)), 4, 7, 1);
  check_finalize(ReduceOp::premul_sum(1.0 / 3.0), 4, 8191, 0);
  check_finalize(ReduceOp::premul_sum(factors(rng_)), 4, kLargeCount, 0);
  check_finalize(ReduceOp::premul_sum(3.0), 4, 8191, 1);   // saturates small integer types
  check_finalize(ReduceOp::premul_sum(-2.5), 4, 8191, 0);  // saturates toward the low end too
  check_finalize(ReduceOp::premul_sum(1e-3), 4, 1, 0);
}

TEST_P(CudaFinalizeTest, PremulSumWithNanFactor) {
  // Integers: 0 (the CPU kernels' rule); floats: NaN everywhere.
  check_finalize(ReduceOp::premul_sum(std::nan("")), 4, 8191, 0);
}

TEST_P(CudaFinalizeTest, OtherOpsLeaveDataUntouched) {
  for (int k = 0; k < kNumReduceKinds; ++k) {
    const auto op = static_cast<ReduceKind>(k);
    if (op == ReduceKind::avg || op == ReduceKind::premul_sum) continue;
    if (ReduceOp(op).is_bitwise() && is_floating(dtype())) continue;
    // nranks 0 is accepted here: only avg divides by it.
    check_finalize(op, 0, 8191, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaFinalizeTest,
                         ::testing::Values(DataType::int8, DataType::uint8, DataType::int32, DataType::uint32,
                                           DataType::int64, DataType::uint64, DataType::float16, DataType::bfloat16,
                                           DataType::float32, DataType::float64),
                         dtype_param_name);

}  // namespace
}  // namespace kolo::test::cuda
