// Element types and reduction operators the peer benchmarks measure: the ones every peer library
// (MPI, Gloo) has natively, named as nccl-tests names them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kolo::peers {

enum class ElementType { int8, uint8, int32, uint32, int64, uint64, float32, float64 };
enum class ReduceKind { sum, prod, min, max };

size_t element_size(ElementType t);
bool is_floating(ElementType t);
const char* type_name(ElementType t);  // nccl-tests' names: "int8", ..., "float", "double"
const char* op_name(ReduceKind k);     // "sum", "prod", "min", "max"

// "all" gives every value. Throw UsageError (peer_options.hpp) for an unknown name.
std::vector<ElementType> parse_types(const std::string& text);
std::vector<ReduceKind> parse_ops(const std::string& text);

// Calls f(T{}) with the C++ type of t, so code can be written once as a template.
template <class F>
decltype(auto) with_element_type(ElementType t, F&& f) {
  switch (t) {
    case ElementType::int8: return f(static_cast<signed char>(0));
    case ElementType::uint8: return f(static_cast<unsigned char>(0));
    case ElementType::int32: return f(static_cast<int>(0));
    case ElementType::uint32: return f(static_cast<unsigned int>(0));
    case ElementType::int64: return f(static_cast<long long>(0));
    case ElementType::uint64: return f(static_cast<unsigned long long>(0));
    case ElementType::float32: return f(static_cast<float>(0));
    case ElementType::float64: break;
  }
  return f(static_cast<double>(0));
}

}  // namespace kolo::peers
