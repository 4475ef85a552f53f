#include "peer_options.hpp"

#include <cstdio>
#include <iterator>

namespace kolo::peers {
namespace {

using bench::ElementType;
using bench::RedOp;

constexpr ElementType kPeerTypes[] = {ElementType::int8,  ElementType::uint8,  ElementType::int32,
                                      ElementType::uint32, ElementType::int64, ElementType::uint64,
                                      ElementType::float32, ElementType::float64};
constexpr RedOp kPeerOps[] = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max};

std::vector<ElementType> parse_types(const std::string& text) {
  if (text == "all") return {std::begin(kPeerTypes), std::end(kPeerTypes)};
  // kolo's spellings too, so one script can drive kolo-perf and the peers alike.
  const std::string name = text == "float32" ? "float" : text == "float64" ? "double" : text;
  for (ElementType t : kPeerTypes) {
    if (name == bench::element_name(t)) return {t};
  }
  throw UsageError("-d: unknown type '" + text +
                   "' (expected int8, uint8, int32, uint32, int64, uint64, float, double or all; "
                   "the peers have no half or bfloat16)");
}

std::vector<RedOp> parse_ops(const std::string& text) {
  if (text == "all") return {std::begin(kPeerOps), std::end(kPeerOps)};
  for (RedOp op : kPeerOps) {
    if (text == bench::redop_name(op)) return {op};
  }
  throw UsageError("-o: unknown operator '" + text +
                   "' (expected sum, prod, min, max or all; avg, premulsum and the bitwise operators "
                   "are kolo-only)");
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  for (const std::string& s : list) {
    if (s == item) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& list) {
  std::string text;
  for (const std::string& s : list) text += (text.empty() ? "" : ", ") + s;
  return text;
}

void apply_own(PeerOptions& o, const std::string& flag, const std::string& value, const ProgramTraits& traits) {
  if (flag == "-T") {
    if (!traits.has_timeout) throw UsageError(std::string(traits.name) + " has no -T: the library has no timeout to set");
    o.timeout = bench::parse_seconds(value, flag);
  } else if (flag == "--algo") {
    if (traits.algorithms.empty()) throw UsageError(std::string(traits.name) + " has no --algo");
    if (!contains(traits.algorithms, value))
      throw UsageError("--algo: unknown algorithm '" + value + "' (expected " + joined(traits.algorithms) + ")");
    o.algorithm = value;
  } else if (flag == "--store-dir") {
    if (!traits.has_store_dir) throw UsageError(std::string(traits.name) + " has no --store-dir");
    o.store_dir = value;
  }
}

}  // namespace

PeerOptions parse_options(int argc, char** argv, const ProgramTraits& traits) {
  PeerOptions o;
  if (!traits.algorithms.empty()) o.algorithm = traits.algorithms.front();
  const std::vector<bench::ExtraFlag> own = {{"-T", "--timeout"}, {"", "--algo"}, {"", "--store-dir"}};
  bench::parse_common(argc, argv, o, own,
                      [&](const std::string& flag, const std::string& value) { apply_own(o, flag, value, traits); });
  // What the peers' plain loop (bench::blocking_run) does not vary, said on the table's "#" lines.
  if (o.agg_iters != 1) o.notes.push_back("-m " + std::to_string(o.agg_iters) + ": the peers issue one operation per iteration");
  if (o.run_cycles != 1) o.notes.push_back("-N " + std::to_string(o.run_cycles) + ": the peers run the sweep once");
  if (o.unalign != 0) o.notes.push_back("-u " + std::to_string(o.unalign) + ": the peers' buffers stay aligned");
  if (o.per_iter_timing) {
    o.notes.push_back("-I 1: the peers do not time single iterations; the table has no i_* columns");
    o.per_iter_timing = false;
    o.per_iter_skip = 0;
  }
  if (o.blocking_mode != bench::Blocking::none)
    o.notes.push_back("-z: every peer operation is waited for anyway, with no barrier");
  o.repeats_cycles = false;
  o.unaligns = false;
  o.fill_before_timing = true;
  o.dtypes = parse_types(o.dtype_text);
  o.ops = parse_ops(o.op_text);
  if (o.help || o.version) return o;
  if (!contains(traits.collectives, o.collective))
    throw UsageError("unknown collective '" + o.collective + "' (" + traits.name + " measures " +
                     joined(traits.collectives) + ")");
  return o;
}

std::string usage_text(const ProgramTraits& traits) {
  std::string text = std::string("usage: ") + traits.name + " COLLECTIVE [options]\n" +
                     "  COLLECTIVE            " + joined(traits.collectives) + "\n" +
                     bench::common_usage_lines("int8 uint8 int32 uint32 int64 uint64 float double, all (default float)",
                                               "sum, prod, min, max or all (default sum)");
  text += "                            (-z, -m, -N and -u are accepted for scripts; the peers issue every\n"
          "                            operation on its own and wait for it, once per size)\n";
  if (traits.has_timeout) text += "  -T, --timeout SEC     the library's per-operation timeout (default 300)\n";
  if (!traits.algorithms.empty()) {
    text += "      --algo NAME       " + joined(traits.algorithms) + " (default " + traits.algorithms.front() + ")\n";
  }
  if (traits.has_store_dir)
    text += "      --store-dir DIR   Gloo FileStore directory (default $TMPDIR/kolo-perf-gloo-$KOLO_JOB_ID)\n";
  text += "Exit status: 0 ok, 2 bad command line, 3 library error, 7 wrong results or below 0.9 x --min-bw.\n";
  return text;
}

int parse_command_line(int argc, char** argv, const ProgramTraits& traits, PeerOptions& o) {
  try {
    o = parse_options(argc, argv, traits);
  } catch (const UsageError& e) {
    // Every rank parses the same arguments and fails alike, before the library starts.
    std::fprintf(stderr, "%s: %s\n\n%s", traits.name, e.what(), usage_text(traits).c_str());
    return kExitUsage;
  }
  if (o.version) {
    std::printf("%s\n", bench::version_line(argv[0]).c_str());
    return kExitOk;
  }
  if (o.help) {
    std::printf("%s", usage_text(traits).c_str());
    return kExitOk;
  }
  return -1;
}

}  // namespace kolo::peers
