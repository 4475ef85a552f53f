// The element types and reduction operators the benchmark harness knows, named as nccl-tests
// names them. Each program turns its -d / -o text into these and accepts the subset its library
// has: kolo-perf all of them (through kolo's own parsers, bench/perf/options.cpp), the peers the
// eight native types and sum, prod, min, max (bench/peers/peer_options.cpp). The enumerators are
// in kolo's order (kolo::DataType, kolo::ReduceKind), which kolo-perf checks at compile time.
#pragma once
#include <cstddef>

namespace kolo::bench {

enum class ElementType { int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64 };
enum class RedOp { sum, prod, min, max, avg, premul_sum, band, bor, bxor };

inline constexpr ElementType kAllElementTypes[] = {
    ElementType::int8,    ElementType::uint8,    ElementType::int32,   ElementType::uint32,  ElementType::int64,
    ElementType::uint64,  ElementType::float16,  ElementType::bfloat16, ElementType::float32, ElementType::float64};
inline constexpr RedOp kAllRedOps[] = {RedOp::sum, RedOp::prod,       RedOp::min,  RedOp::max, RedOp::avg,
                                       RedOp::premul_sum, RedOp::band, RedOp::bor, RedOp::bxor};

size_t element_size(ElementType t);
bool is_floating(ElementType t);
bool is_bitwise(RedOp op);
// nccl-tests' names: "int8", ..., "half", "bfloat16", "float", "double"; "sum", ..., "mulsum" (premul_sum).
const char* element_name(ElementType t);
const char* redop_name(RedOp op);

}  // namespace kolo::bench
