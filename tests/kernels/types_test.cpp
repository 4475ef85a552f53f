// The DataType/ReduceKind helpers of kolo/types.hpp: sizes, names, parsing and its errors.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include "kolo/error.hpp"
#include "kolo/types.hpp"

namespace kolo {
namespace {

TEST(DataTypes, SizesAndFloatingness) {
  const std::pair<DataType, size_t> sizes[] = {
      {DataType::int8, 1},    {DataType::uint8, 1},    {DataType::int32, 4},    {DataType::uint32, 4},
      {DataType::int64, 8},   {DataType::uint64, 8},   {DataType::float16, 2},  {DataType::bfloat16, 2},
      {DataType::float32, 4}, {DataType::float64, 8},
  };
  for (auto [t, size] : sizes) {
    EXPECT_EQ(dtype_size(t), size) << dtype_name(t);
    const bool floating = t == DataType::float16 || t == DataType::bfloat16 || t == DataType::float32 ||
                          t == DataType::float64;
    EXPECT_EQ(is_floating(t), floating) << dtype_name(t);
  }
}

TEST(DataTypes, EveryNameParsesBackToItsType) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto t = static_cast<DataType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_STREQ(dtype_name(DataType::bfloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(DataType::float16), "float16");
}

TEST(DataTypes, ParsesNcclTestsAndShortSpellings) {
  const std::pair<const char*, DataType> names[] = {
      {"int8", DataType::int8},         {"uint8", DataType::uint8},       {"int32", DataType::int32},
      {"uint32", DataType::uint32},     {"int64", DataType::int64},       {"uint64", DataType::uint64},
      {"half", DataType::float16},      {"float16", DataType::float16},   {"fp16", DataType::float16},
      {"bfloat16", DataType::bfloat16}, {"bf16", DataType::bfloat16},     {"float", DataType::float32},
      {"float32", DataType::float32},   {"fp32", DataType::float32},      {"f32", DataType::float32},
      {"double", DataType::float64},    {"float64", DataType::float64},   {"fp64", DataType::float64},
      {"FLOAT", DataType::float32},     {"BF16", DataType::bfloat16},
  };
  for (auto [name, t] : names) EXPECT_EQ(parse_dtype(name), t) << name;
}

TEST(DataTypes, UnknownNamesAndValuesThrow) {
  for (const char* bad : {"", "float8", "int16", "floaty", " float", "complex64"}) {
    EXPECT_THROW(parse_dtype(bad), InvalidArgument) << "'" << bad << "'";
  }
  const auto bogus = static_cast<DataType>(kNumDataTypes);
  EXPECT_THROW(dtype_size(bogus), InvalidArgument);
  EXPECT_THROW(dtype_name(bogus), InvalidArgument);
  EXPECT_THROW(is_floating(bogus), InvalidArgument);
}

TEST(ReduceKinds, NamesRoundTripAndAliasesParse) {
  const std::pair<const char*, ReduceKind> names[] = {
      {"sum", ReduceKind::sum},   {"prod", ReduceKind::prod},           {"min", ReduceKind::min},
      {"max", ReduceKind::max},   {"avg", ReduceKind::avg},             {"premul_sum", ReduceKind::premul_sum},
      {"band", ReduceKind::band}, {"bor", ReduceKind::bor},             {"bxor", ReduceKind::bxor},
  };
  for (auto [name, k] : names) {
    EXPECT_EQ(parse_reduce(name), k) << name;
    EXPECT_STREQ(reduce_name(k), name);
  }
  EXPECT_EQ(parse_reduce("premulsum"), ReduceKind::premul_sum);
  EXPECT_EQ(parse_reduce("SUM"), ReduceKind::sum);
}

TEST(ReduceKinds, UnknownNamesAndValuesThrow) {
  for (const char* bad : {"", "add", "mean", "all", "sum "}) {
    EXPECT_THROW(parse_reduce(bad), InvalidArgument) << "'" << bad << "'";
  }
  EXPECT_THROW(reduce_name(static_cast<ReduceKind>(kNumReduceKinds)), InvalidArgument);
}

}  // namespace
}  // namespace kolo
