// Element types, reduction operators and devices: the vocabulary every other header uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo {

enum class DataType : uint8_t {
  int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
};
constexpr int kNumDataTypes = 10;

[[noreturn]] void throw_unknown_dtype(DataType t);  // InvalidArgument naming the value
// Size of one element in bytes; throws InvalidArgument for an unknown value. Inline: every
// collective asks for it several times (validation, stamping, the algorithm's offsets).
inline size_t dtype_size(DataType t) {
  // static: a local constexpr array was built on the stack at every call (two stores).
  static constexpr unsigned char kSizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};  // enum order
  const auto i = static_cast<unsigned>(t);
  if (i >= kNumDataTypes) throw_unknown_dtype(t);
  return kSizes[i];
}
const char* dtype_name(DataType t);
// Parses "float32", "f32", "float", "half", "bf16", "int8", ... ; throws on unknown names.
DataType parse_dtype(const std::string& name);
bool is_floating(DataType t);

enum class ReduceKind : uint8_t { sum, prod, min, max, avg, premul_sum, band, bor, bxor };
constexpr int kNumReduceKinds = 9;

// A reduction operator. premul_sum multiplies every input by `factor` before summing
// (c10d's _make_nccl_premul_sum); avg divides the sum by the number of ranks.
struct ReduceOp {
  ReduceKind kind = ReduceKind::sum;
  double factor = 1.0;  // premul_sum only

  constexpr ReduceOp() = default;
  constexpr ReduceOp(ReduceKind k) : kind(k) {}  // NOLINT: implicit on purpose (ReduceOp op = ReduceKind::max)
  static constexpr ReduceOp premul_sum(double f) { ReduceOp o(ReduceKind::premul_sum); o.factor = f; return o; }
  bool is_bitwise() const { return kind == ReduceKind::band || kind == ReduceKind::bor || kind == ReduceKind::bxor; }
};
const char* reduce_name(ReduceKind k);
ReduceKind parse_reduce(const std::string& name);

// Where a buffer lives: host memory, or the memory of CUDA device `index` (as cudaSetDevice
// numbers them). Every buffer an operation uses must live on one device; a CUDA operation is
// staged through pinned host memory over the host transports (docs/ARCHITECTURE.md, "Device
// memory").
struct Device {
  enum class Type : uint8_t { cpu, cuda } type = Type::cpu;
  int index = -1;
  static Device cpu() { return {}; }
  static Device cuda(int i) { return {Type::cuda, i}; }
  bool is_cpu() const { return type == Type::cpu; }
  bool is_cuda() const { return type == Type::cuda; }
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type == Type::cpu || a.index == b.index);
  }
};
std::string device_name(const Device& d);  // "cpu", "cuda:0"

}  // namespace kolo
