// Names, sizes and parsing of the DataType and ReduceKind enumerations (kolo/types.hpp).
// parse_dtype accepts kolo's names and the spellings of nccl-tests and PyTorch
// (half/float16/fp16, bf16, float/fp32, double/fp64, ...), case-insensitively.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include "kolo/error.hpp"
#include "kolo/types.hpp"

namespace kolo {
namespace {

struct DataTypeInfo {
  const char* name;
  bool floating;
};

// Sizes are in kolo/types.hpp (dtype_size, inline).
constexpr DataTypeInfo kDataTypes[kNumDataTypes] = {
    {"int8", false},    {"uint8", false},    {"int32", false},   {"uint32", false},
    {"int64", false},   {"uint64", false},   {"float16", true},  {"bfloat16", true},
    {"float32", true},  {"float64", true},
};

constexpr const char* kReduceNames[kNumReduceKinds] = {"sum", "prod", "min", "max", "avg",
                                                       "premul_sum", "band", "bor", "bxor"};

const DataTypeInfo& info(DataType t) {
  const auto index = static_cast<unsigned>(t);
  if (index >= kNumDataTypes) throw_unknown_dtype(t);
  return kDataTypes[index];
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct Alias {
  std::string_view name;
  DataType type;
};

constexpr Alias kDataTypeAliases[] = {
    {"int8", DataType::int8},         {"i8", DataType::int8},          {"char", DataType::int8},
    {"uint8", DataType::uint8},       {"u8", DataType::uint8},
    {"int32", DataType::int32},       {"i32", DataType::int32},        {"int", DataType::int32},
    {"uint32", DataType::uint32},     {"u32", DataType::uint32},
    {"int64", DataType::int64},       {"i64", DataType::int64},
    {"uint64", DataType::uint64},     {"u64", DataType::uint64},
    {"float16", DataType::float16},   {"half", DataType::float16},     {"fp16", DataType::float16},
    {"f16", DataType::float16},
    {"bfloat16", DataType::bfloat16}, {"bf16", DataType::bfloat16},
    {"float32", DataType::float32},   {"float", DataType::float32},    {"fp32", DataType::float32},
    {"f32", DataType::float32},
    {"float64", DataType::float64},   {"double", DataType::float64},   {"fp64", DataType::float64},
    {"f64", DataType::float64},
};

}  // namespace

void throw_unknown_dtype(DataType t) {
  throw InvalidArgument("unknown data type value " + std::to_string(static_cast<unsigned>(t)));
}
const char* dtype_name(DataType t) { return info(t).name; }
bool is_floating(DataType t) { return info(t).floating; }

DataType parse_dtype(const std::string& name) {
  const std::string key = lowercase(name);
  for (const Alias& alias : kDataTypeAliases) {
    if (alias.name == key) return alias.type;
  }
  throw InvalidArgument("unknown data type '" + name +
                        "' (expected int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32 or float64)");
}

const char* reduce_name(ReduceKind k) {
  const auto index = static_cast<unsigned>(k);
  if (index >= kNumReduceKinds) throw InvalidArgument("unknown reduce op value " + std::to_string(index));
  return kReduceNames[index];
}

std::string device_name(const Device& d) { return d.is_cpu() ? "cpu" : "cuda:" + std::to_string(d.index); }

ReduceKind parse_reduce(const std::string& name) {
  const std::string key = lowercase(name);
  if (key == "premulsum") return ReduceKind::premul_sum;
  for (int i = 0; i < kNumReduceKinds; ++i) {
    if (key == kReduceNames[i]) return static_cast<ReduceKind>(i);
  }
  throw InvalidArgument("unknown reduce op '" + name +
                        "' (expected sum, prod, min, max, avg, premul_sum, band, bor or bxor)");
}

}  // namespace kolo
