#include "peer_types.hpp"

#include "peer_options.hpp"

namespace kolo::peers {
namespace {

constexpr ElementType kAllTypes[] = {ElementType::int8,  ElementType::uint8,  ElementType::int32,
                                     ElementType::uint32, ElementType::int64, ElementType::uint64,
                                     ElementType::float32, ElementType::float64};
constexpr ReduceKind kAllOps[] = {ReduceKind::sum, ReduceKind::prod, ReduceKind::min, ReduceKind::max};

}  // namespace

size_t element_size(ElementType t) {
  return with_element_type(t, [](auto zero) { return sizeof zero; });
}

bool is_floating(ElementType t) { return t == ElementType::float32 || t == ElementType::float64; }

const char* type_name(ElementType t) {
  switch (t) {
    case ElementType::int8: return "int8";
    case ElementType::uint8: return "uint8";
    case ElementType::int32: return "int32";
    case ElementType::uint32: return "uint32";
    case ElementType::int64: return "int64";
    case ElementType::uint64: return "uint64";
    case ElementType::float32: return "float";
    case ElementType::float64: return "double";
  }
  return "?";
}

const char* op_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::prod: return "prod";
    case ReduceKind::min: return "min";
    case ReduceKind::max: return "max";
  }
  return "?";
}

std::vector<ElementType> parse_types(const std::string& text) {
  if (text == "all") return {std::begin(kAllTypes), std::end(kAllTypes)};
  // kolo's spellings too, so one script can drive kolo-perf and the peers alike.
  const std::string name = text == "float32" ? "float" : text == "float64" ? "double" : text;
  for (ElementType t : kAllTypes) {
    if (name == type_name(t)) return {t};
  }
  throw UsageError("-d: unknown type '" + text +
                   "' (expected int8, uint8, int32, uint32, int64, uint64, float, double or all; "
                   "the peers have no half or bfloat16)");
}

std::vector<ReduceKind> parse_ops(const std::string& text) {
  if (text == "all") return {std::begin(kAllOps), std::end(kAllOps)};
  for (ReduceKind k : kAllOps) {
    if (text == op_name(k)) return {k};
  }
  throw UsageError("-o: unknown operator '" + text +
                   "' (expected sum, prod, min, max or all; avg, premulsum and the bitwise operators "
                   "are kolo-only)");
}

}  // namespace kolo::peers
