// cuda::reduce, reduce_inplace and reduce_copy2 on a GPU, for every dtype x op the API
// defines, against the host reference (cuda_reference.hpp): counts 0, 1, 7, 8191 and
// 2^20 + 3; pointers 16-byte aligned (vector path), all shifted by one element (scalar head
// and tail around the vectors) or shifted relative to each other (element-by-element path);
// outputs poisoned first and guarded on both sides; inputs checked unchanged; every aliasing
// form (dst == a, dst == b, dst == a == b, dst1 == a). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>
#include "kernels/cuda/cuda_api.hpp"
#include "kernels/cuda/reduce.cuh"
#include "tests/cuda/cuda_reference.hpp"
#include "tests/cuda/cuda_test_support.hpp"

namespace kolo::test::cuda {
namespace {

constexpr size_t kLargeCount = (size_t{1} << 20) + 3;

// Where each buffer starts relative to a 256-byte boundary, in elements.
struct Layout {
  const char* name;
  size_t a, b, dst, dst2;
};
constexpr Layout kAligned{"aligned", 0, 0, 0, 0};
constexpr Layout kAllShifted{"all shifted by 1 element", 1, 1, 1, 1};
constexpr Layout kDstShifted{"dst shifted by 1 element", 0, 0, 1, 0};
constexpr Layout kBShifted{"b and dst2 shifted by 1 element", 0, 1, 0, 1};

struct Case {
  DataType dtype;
  ReduceKind op;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_" + reduce_name(info.param.op);
}

// Every (dtype, op) the API defines: bitwise ops on integers only.
std::vector<Case> defined_cases() {
  std::vector<Case> cases;
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int k = 0; k < kNumReduceKinds; ++k) {
      const auto dtype = static_cast<DataType>(t);
      const auto op = static_cast<ReduceKind>(k);
      if (ReduceOp(op).is_bitwise() && is_floating(dtype)) continue;
      cases.push_back({dtype, op});
    }
  }
  return cases;
}

// Host inputs and the expected result of a (op) b for each element.
struct Inputs {
  std::vector<unsigned char> a, b;
  std::vector<Expected> expected;
};

class CudaReduceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    KOLO_SKIP_WITHOUT_CUDA();
    rng_ = test_rng();
    stream_ = std::make_unique<Stream>();
  }

  DataType dtype() const { return GetParam().dtype; }
  ReduceKind op() const { return GetParam().op; }
  size_t bytes(size_t count) const { return count * dtype_size(dtype()); }

  // same_inputs: b is a copy of a (for the dst == a == b form).
  Inputs make_inputs(size_t count, bool same_inputs = false) {
    Inputs in;
    in.a = random_elements(dtype(), count, rng_);
    in.b = same_inputs ? in.a : random_elements(dtype(), count, rng_);
    in.expected.resize(count);
    parallel_chunks(count, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        in.expected[i] = reference_reduce(dtype(), op(), element_bits(in.a, dtype(), i), element_bits(in.b, dtype(), i));
      }
    });
    return in;
  }

  std::unique_ptr<DeviceBuffer> upload(const std::vector<unsigned char>& host, size_t offset_elements) {
    auto buffer = std::make_unique<DeviceBuffer>(host.size(), offset_elements * dtype_size(dtype()));
    buffer->upload(host.data(), stream_->get());
    return buffer;
  }
  std::unique_ptr<DeviceBuffer> poisoned(size_t count, size_t offset_elements) {
    auto buffer = std::make_unique<DeviceBuffer>(bytes(count), offset_elements * dtype_size(dtype()));
    buffer->poison(stream_->get());
    return buffer;
  }

  ::testing::AssertionResult result_matches(const DeviceBuffer& out, const Inputs& in, size_t count) {
    if (!out.guards_intact()) return ::testing::AssertionFailure() << "a write landed outside the output";
    const std::vector<unsigned char> got = out.download();
    return all_match(
        dtype(), got, count, [&](size_t i) { return in.expected[i]; },
        [&](size_t i) {
          return "a=" + hex(element_bits(in.a, dtype(), i)) + " b=" + hex(element_bits(in.b, dtype(), i));
        });
  }
  // An input buffer that is not also an output must come back untouched (and unguarded bytes intact).
  ::testing::AssertionResult unchanged(const DeviceBuffer& buffer, const std::vector<unsigned char>& host) {
    if (!buffer.guards_intact()) return ::testing::AssertionFailure() << "a write landed next to an input";
    if (buffer.download() != host) return ::testing::AssertionFailure() << "an input buffer was modified";
    return ::testing::AssertionSuccess();
  }

  std::mt19937_64 rng_;
  std::unique_ptr<Stream> stream_;
};

TEST_P(CudaReduceTest, DistinctBuffers) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8191}, kLargeCount}) {
    const Inputs in = make_inputs(count);
    for (const Layout& layout : {kAligned, kAllShifted, kDstShifted, kBShifted}) {
      SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
      auto a = upload(in.a, layout.a);
      auto b = upload(in.b, layout.b);
      auto dst = poisoned(count, layout.dst);
      kernels::cuda::reduce(dtype(), op(), dst->data(), a->data(), b->data(), count, stream_->opaque());
      wait_for(stream_->get());
      EXPECT_TRUE(result_matches(*dst, in, count));
      EXPECT_TRUE(unchanged(*a, in.a));
      EXPECT_TRUE(unchanged(*b, in.b));
    }
  }
}

TEST_P(CudaReduceTest, InPlaceDstIsA) {
  const std::pair<size_t, Layout> runs[] = {
      {7, kAligned}, {8191, kAllShifted}, {8191, kDstShifted}, {kLargeCount, kAligned}};
  for (const auto& [count, layout] : runs) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    const Inputs in = make_inputs(count);
    auto dst = upload(in.a, layout.dst);
    auto src = upload(in.b, layout.b);
    kernels::cuda::reduce_inplace(dtype(), op(), dst->data(), src->data(), count, stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*dst, in, count));
    EXPECT_TRUE(unchanged(*src, in.b));
  }
}

TEST_P(CudaReduceTest, DstIsB) {
  for (const auto& [count, layout] : {std::pair{size_t{7}, kAligned}, std::pair{size_t{8191}, kBShifted},
                                      std::pair{size_t{8191}, kAllShifted}}) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    const Inputs in = make_inputs(count);
    auto a = upload(in.a, layout.a);
    auto b = upload(in.b, layout.b);
    kernels::cuda::reduce(dtype(), op(), b->data(), a->data(), b->data(), count, stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*b, in, count));
    EXPECT_TRUE(unchanged(*a, in.a));
  }
}

TEST_P(CudaReduceTest, DstIsAIsB) {
  for (const auto& [count, layout] : {std::pair{size_t{7}, kAllShifted}, std::pair{size_t{8191}, kAligned}}) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    const Inputs in = make_inputs(count, /*same_inputs=*/true);
    auto data = upload(in.a, layout.a);
    kernels::cuda::reduce(dtype(), op(), data->data(), data->data(), data->data(), count, stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*data, in, count));
  }
}

TEST_P(CudaReduceTest, Copy2WritesBothOutputs) {
  const std::pair<size_t, Layout> runs[] = {
      {0, kAligned}, {1, kAligned}, {8191, kAllShifted}, {8191, kBShifted}, {kLargeCount, kAligned}};
  for (const auto& [count, layout] : runs) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    const Inputs in = make_inputs(count);
    auto a = upload(in.a, layout.a);
    auto b = upload(in.b, layout.b);
    auto dst1 = poisoned(count, layout.dst);
    auto dst2 = poisoned(count, layout.dst2);
    kernels::cuda::reduce_copy2(dtype(), op(), dst1->data(), dst2->data(), a->data(), b->data(), count,
                                stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*dst1, in, count)) << "dst1";
    EXPECT_TRUE(result_matches(*dst2, in, count)) << "dst2";
    EXPECT_TRUE(unchanged(*a, in.a));
    EXPECT_TRUE(unchanged(*b, in.b));
  }
}

TEST_P(CudaReduceTest, Copy2WithDst1IsA) {
  for (const auto& [count, layout] : {std::pair{size_t{8191}, kAligned}, std::pair{size_t{7}, kBShifted}}) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    const Inputs in = make_inputs(count);
    auto a = upload(in.a, layout.a);
    auto b = upload(in.b, layout.b);
    auto dst2 = poisoned(count, layout.dst2);
    kernels::cuda::reduce_copy2(dtype(), op(), a->data(), dst2->data(), a->data(), b->data(), count,
                                stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*a, in, count)) << "dst1 == a";
    EXPECT_TRUE(result_matches(*dst2, in, count)) << "dst2";
    EXPECT_TRUE(unchanged(*b, in.b));
  }
}

// The typed-stream overload of reduce.cuh on the legacy default stream.
TEST_P(CudaReduceTest, TypedStreamOverloadOnDefaultStream) {
  constexpr size_t kCount = 4099;
  const Inputs in = make_inputs(kCount);
  auto a = upload(in.a, 0);
  auto b = upload(in.b, 0);
  auto dst = std::make_unique<DeviceBuffer>(bytes(kCount), 0);
  dst->poison(cudaStream_t{});
  kernels::cuda::reduce(dtype(), op(), dst->data(), a->data(), b->data(), kCount, cudaStream_t{});
  wait_for(cudaStream_t{});
  EXPECT_TRUE(result_matches(*dst, in, kCount));
}

INSTANTIATE_TEST_SUITE_P(AllDefined, CudaReduceTest, ::testing::ValuesIn(defined_cases()), case_name);

// 32 MiB per buffer: more than 16 bytes x kUnroll (4) for every thread a GPU of up to ~250 SMs
// holds at once, so the grid-stride loops of both the vector and the element-by-element path
// go round several times (2^20 elements of a narrow type fit in a single round). A few
// (dtype, op) pairs cover the narrowest and widest vector lanes and each dtype family.
class CudaLongReduceTest : public CudaReduceTest {};

TEST_P(CudaLongReduceTest, GridStrideLoopsGoRoundSeveralTimes) {
  const size_t count = (size_t{32} << 20) / dtype_size(dtype()) + 3;
  const Inputs in = make_inputs(count);
  for (const Layout& layout : {kAligned, kDstShifted}) {
    SCOPED_TRACE(std::to_string(count) + " elements, " + layout.name);
    auto a = upload(in.a, layout.a);
    auto b = upload(in.b, layout.b);
    auto dst = poisoned(count, layout.dst);
    kernels::cuda::reduce(dtype(), op(), dst->data(), a->data(), b->data(), count, stream_->opaque());
    wait_for(stream_->get());
    EXPECT_TRUE(result_matches(*dst, in, count));
  }
}

INSTANTIATE_TEST_SUITE_P(Selected, CudaLongReduceTest,
                         ::testing::Values(Case{DataType::int8, ReduceKind::sum}, Case{DataType::uint64, ReduceKind::bxor},
                                           Case{DataType::bfloat16, ReduceKind::max},
                                           Case{DataType::float32, ReduceKind::prod},
                                           Case{DataType::float64, ReduceKind::sum}),
                         case_name);

}  // namespace
}  // namespace kolo::test::cuda
