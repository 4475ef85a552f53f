#include "elements.hpp"

namespace kolo::bench {

size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::int8:
    case ElementType::uint8: return 1;
    case ElementType::float16:
    case ElementType::bfloat16: return 2;
    case ElementType::int32:
    case ElementType::uint32:
    case ElementType::float32: return 4;
    case ElementType::int64:
    case ElementType::uint64:
    case ElementType::float64: return 8;
  }
  return 1;
}

bool is_floating(ElementType t) {
  return t == ElementType::float16 || t == ElementType::bfloat16 || t == ElementType::float32 ||
         t == ElementType::float64;
}

bool is_bitwise(RedOp op) { return op == RedOp::band || op == RedOp::bor || op == RedOp::bxor; }

const char* element_name(ElementType t) {
  switch (t) {
    case ElementType::int8: return "int8";
    case ElementType::uint8: return "uint8";
    case ElementType::int32: return "int32";
    case ElementType::uint32: return "uint32";
    case ElementType::int64: return "int64";
    case ElementType::uint64: return "uint64";
    case ElementType::float16: return "half";
    case ElementType::bfloat16: return "bfloat16";
    case ElementType::float32: return "float";
    case ElementType::float64: return "double";
  }
  return "?";
}

const char* redop_name(RedOp op) {
  switch (op) {
    case RedOp::sum: return "sum";
    case RedOp::prod: return "prod";
    case RedOp::min: return "min";
    case RedOp::max: return "max";
    case RedOp::avg: return "avg";
    case RedOp::premul_sum: return "mulsum";
    case RedOp::band: return "band";
    case RedOp::bor: return "bor";
    case RedOp::bxor: return "bxor";
  }
  return "?";
}

}  // namespace kolo::bench
