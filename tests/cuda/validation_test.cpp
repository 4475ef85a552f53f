// What the CUDA kernel entry points refuse before launching anything, and what they do when
// there is no device. None of these tests touches device memory: the refused calls are given
// host addresses, which a correct implementation never dereferences (it throws first). So
// they run, and must pass, on machines without a GPU too; only the last test depends on
// whether a device exists, and skips where it does not apply.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
#include "kernels/cuda/cuda_api.hpp"
#include "kolo/error.hpp"

namespace kolo::test::cuda {
namespace {

namespace kc = kernels::cuda;

// 8-byte aligned host storage the refused calls can point at.
struct HostArrays {
  alignas(16) uint64_t a[64] = {};
  alignas(16) uint64_t b[64] = {};
  alignas(16) uint64_t dst[64] = {};
  alignas(16) uint64_t dst2[64] = {};
};

template <class Call>
std::string invalid_argument_message(Call call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

TEST(CudaValidation, BitwiseOpsOnFloatsAreRefused) {
  HostArrays h;
  for (DataType t : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64}) {
    for (ReduceKind op : {ReduceKind::band, ReduceKind::bor, ReduceKind::bxor}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + reduce_name(op));
      EXPECT_NE(invalid_argument_message([&] { kc::reduce(t, op, h.dst, h.a, h.b, 16, nullptr); }).find("bitwise"),
                std::string::npos);
      EXPECT_THROW(kc::reduce_inplace(t, op, h.dst, h.a, 16, nullptr), InvalidArgument);
      EXPECT_THROW(kc::reduce_copy2(t, op, h.dst, h.dst2, h.a, h.b, 16, nullptr), InvalidArgument);
      // Refused even for an empty range, as the CPU kernels do.
      EXPECT_THROW(kc::reduce(t, op, nullptr, nullptr, nullptr, 0, nullptr), InvalidArgument);
    }
  }
  // Nothing was written.
  for (uint64_t v : h.dst) EXPECT_EQ(v, 0u);
}

TEST(CudaValidation, UnknownDtypeAndOpAreRefused) {
  HostArrays h;
  const auto bad_type = static_cast<DataType>(kNumDataTypes);
  const auto bad_op = static_cast<ReduceKind>(kNumReduceKinds);
  EXPECT_NE(invalid_argument_message([&] { kc::reduce(bad_type, ReduceKind::sum, h.dst, h.a, h.b, 4, nullptr); })
                .find("unknown data type"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { kc::reduce(DataType::int32, bad_op, h.dst, h.a, h.b, 4, nullptr); })
                .find("unknown reduce op"),
            std::string::npos);
  EXPECT_THROW(kc::finalize(bad_type, ReduceKind::avg, h.dst, 4, 2, nullptr), InvalidArgument);
  EXPECT_THROW(kc::finalize(DataType::float32, ReduceOp(bad_op), h.dst, 4, 2, nullptr), InvalidArgument);
}

TEST(CudaValidation, EmptyRangesNeedNoBuffersAndLaunchNothing) {
  // With count 0 nothing reaches the runtime, so these succeed with or without a GPU.
  EXPECT_NO_THROW(kc::reduce(DataType::float32, ReduceKind::sum, nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(kc::reduce_inplace(DataType::int8, ReduceKind::bxor, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(kc::reduce_copy2(DataType::bfloat16, ReduceKind::max, nullptr, nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(kc::finalize(DataType::float16, ReduceKind::avg, nullptr, 0, 4, nullptr));
  EXPECT_NO_THROW(kc::finalize(DataType::int64, ReduceOp::premul_sum(0.5), nullptr, 0, 4, nullptr));
}

TEST(CudaValidation, NullBuffersAreRefused) {
  HostArrays h;
  EXPECT_NE(invalid_argument_message([&] { kc::reduce(DataType::float32, ReduceKind::sum, h.dst, nullptr, h.b, 4, nullptr); })
                .find("a is null"),
            std::string::npos);
  EXPECT_THROW(kc::reduce(DataType::float32, ReduceKind::sum, h.dst, h.a, nullptr, 4, nullptr), InvalidArgument);
  EXPECT_THROW(kc::reduce(DataType::float32, ReduceKind::sum, nullptr, h.a, h.b, 4, nullptr), InvalidArgument);
  EXPECT_THROW(kc::reduce_copy2(DataType::int32, ReduceKind::sum, h.dst, nullptr, h.a, h.b, 4, nullptr), InvalidArgument);
  EXPECT_THROW(kc::finalize(DataType::float32, ReduceKind::avg, nullptr, 4, 2, nullptr), InvalidArgument);
}

TEST(CudaValidation, PointersNotAlignedToTheElementAreRefused) {
  HostArrays h;
  const auto* odd = reinterpret_cast<const unsigned char*>(h.a) + 2;  // 2-byte aligned only
  EXPECT_NE(invalid_argument_message([&] { kc::reduce(DataType::float32, ReduceKind::sum, h.dst, odd, h.b, 4, nullptr); })
                .find("aligned"),
            std::string::npos);
  EXPECT_THROW(kc::finalize(DataType::float64, ReduceKind::avg, const_cast<unsigned char*>(odd), 4, 2, nullptr),
               InvalidArgument);
}

TEST(CudaValidation, PartialOverlapIsRefused) {
  HostArrays h;
  // dst starts one element into a: element i of dst is element i + 1 of a.
  EXPECT_NE(invalid_argument_message([&] { kc::reduce(DataType::int64, ReduceKind::sum, h.a + 1, h.a, h.b, 8, nullptr); })
                .find("overlap"),
            std::string::npos);
  EXPECT_THROW(kc::reduce_copy2(DataType::int64, ReduceKind::sum, h.dst, h.dst + 4, h.a, h.b, 8, nullptr),
               InvalidArgument);
}

TEST(CudaValidation, AvgNeedsPositiveRankCount) {
  HostArrays h;
  EXPECT_NE(invalid_argument_message([&] { kc::finalize(DataType::float32, ReduceKind::avg, h.dst, 4, 0, nullptr); })
                .find("nranks"),
            std::string::npos);
  EXPECT_THROW(kc::finalize(DataType::int32, ReduceKind::avg, h.dst, 4, -3, nullptr), InvalidArgument);
  // The other ops ignore nranks (nothing to do): no error and no launch.
  EXPECT_NO_THROW(kc::finalize(DataType::int32, ReduceKind::max, h.dst, 4, 0, nullptr));
}

TEST(CudaValidation, ProbeIsConsistent) {
  const kernels::CudaProbe& probe = kernels::cuda_probe();
  EXPECT_EQ(kernels::cuda_available(), probe.device_count > 0);
  EXPECT_GE(probe.device_count, 0);
  // Without a device the probe says why; with one it has nothing to say.
  EXPECT_EQ(probe.error.empty(), probe.device_count > 0) << probe.error;
  // Asked once: the same object every time.
  EXPECT_EQ(&probe, &kernels::cuda_probe());
}

TEST(CudaValidation, WithoutDeviceAValidCallThrowsErrorNotAbort) {
  if (kernels::cuda_available()) GTEST_SKIP() << "a CUDA device is present; this checks the no-device path";
  HostArrays h;
  try {
    kc::reduce(DataType::float32, ReduceKind::sum, h.dst, h.a, h.b, 16, nullptr);
    ADD_FAILURE() << "a launch without a device did not throw";
  } catch (const InvalidArgument& e) {
    ADD_FAILURE() << "valid arguments refused: " << e.what();
  } catch (const Error& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    std::printf("[cuda-test] without a device: %s\n", e.what());
  }
  for (uint64_t v : h.dst) EXPECT_EQ(v, 0u);
}

}  // namespace
}  // namespace kolo::test::cuda
