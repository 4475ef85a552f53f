// The layout agreement: a cheap allgather of a hash first; only when the hashes differ are the
// whole layout descriptions gathered, so that every rank can name the same first difference.
#include "ddp/layout_check.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/hash.hpp"
#include "ddp/compression.hpp"
#include "kolo/error.hpp"

namespace kolo::ddp {

namespace {

struct Layout {
  size_t total = 0;
  uint64_t first_bucket_bytes = 0;
  uint64_t bucket_bytes = 0;
  uint64_t compression = 0;
  uint64_t sharded = 0;  // ShardedDataParallel (reduce-scatter) rather than all-reduce
  std::vector<DdpParam> params;
};

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Binary description: total, the options that shape the collectives (bucket sizes,
// compression, sharding), count, then (name length, name, offset, count) per parameter.
std::vector<uint8_t> encode(const std::vector<DdpParam>& layout, size_t total, const DdpOptions& opts, bool sharded) {
  std::vector<uint8_t> out;
  put_u64(out, total);
  put_u64(out, opts.first_bucket_bytes);
  put_u64(out, opts.bucket_bytes);
  put_u64(out, static_cast<uint64_t>(opts.compression));
  put_u64(out, sharded ? 1 : 0);
  put_u64(out, layout.size());
  for (const DdpParam& p : layout) {
    put_u64(out, p.name.size());
    out.insert(out.end(), p.name.begin(), p.name.end());
    put_u64(out, p.offset);
    put_u64(out, p.count);
  }
  return out;
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(data_[pos_++]) << (8 * i);
    return v;
  }
  std::string text(size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  void need(size_t n) {
    if (n > size_ - pos_) throw Error("kolo: DistributedDataParallel: a gathered layout description is truncated");
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Layout decode(const uint8_t* data, size_t size) {
  Reader r(data, size);
  Layout l;
  l.total = r.u64();
  l.first_bucket_bytes = r.u64();
  l.bucket_bytes = r.u64();
  l.compression = r.u64();
  l.sharded = r.u64();
  const uint64_t n = r.u64();
  for (uint64_t i = 0; i < n; ++i) {
    DdpParam p;
    p.name = r.text(r.u64());
    p.offset = r.u64();
    p.count = r.u64();
    l.params.push_back(std::move(p));
  }
  return l;
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) { return common::fnv1a(bytes.data(), bytes.size()); }

std::string param_text(const DdpParam& p) {
  return "'" + p.name + "' at offset " + std::to_string(p.offset) + " with " + std::to_string(p.count) + " elements";
}

// The first difference between rank 0's layout and rank r's, as a sentence.
std::string first_difference(const Layout& zero, const Layout& other, int r) {
  const std::string them = "rank " + std::to_string(r);
  const size_t common = std::min(zero.params.size(), other.params.size());
  for (size_t i = 0; i < common; ++i) {
    const DdpParam& a = zero.params[i];
    const DdpParam& b = other.params[i];
    if (a.name != b.name || a.offset != b.offset || a.count != b.count)
      return "parameter #" + std::to_string(i) + ": " + them + " has " + param_text(b) + " where rank 0 has " +
             param_text(a);
  }
  if (zero.params.size() != other.params.size()) {
    const bool longer = other.params.size() > zero.params.size();
    const DdpParam& extra = longer ? other.params[common] : zero.params[common];
    return them + " has " + std::to_string(other.params.size()) + " parameters where rank 0 has " +
           std::to_string(zero.params.size()) + " (parameter #" + std::to_string(common) + " " + param_text(extra) +
           " exists on " + (longer ? them : std::string("rank 0")) + " only)";
  }
  if (zero.total != other.total)
    return them + " has buffers of " + std::to_string(other.total) + " elements where rank 0 has " +
           std::to_string(zero.total);
  if (zero.compression != other.compression)
    return them + " uses compression " + compression_name(static_cast<GradCompression>(other.compression)) +
           " where rank 0 uses " + compression_name(static_cast<GradCompression>(zero.compression));
  if (zero.sharded != other.sharded) {
    auto mode = [](uint64_t sharded) { return sharded ? "ShardedDataParallel" : "DistributedDataParallel"; };
    return them + " runs " + mode(other.sharded) + " where rank 0 runs " + mode(zero.sharded);
  }
  return them + " uses bucket sizes " + std::to_string(other.first_bucket_bytes) + "/" +
         std::to_string(other.bucket_bytes) + " bytes where rank 0 uses " + std::to_string(zero.first_bucket_bytes) +
         "/" + std::to_string(zero.bucket_bytes);
}

}  // namespace

void check_same_layout(ProcessGroup& group, const std::vector<DdpParam>& layout, size_t total,
                       const DdpOptions& opts, bool sharded) {
  const int size = group.size();
  const std::vector<uint8_t> mine = encode(layout, total, opts, sharded);
  AllgatherOptions ag;
  ag.timeout = opts.timeout;

  // Round 1: (hash, description length) from every rank.
  const uint64_t summary[2] = {fnv1a(mine), mine.size()};
  std::vector<uint64_t> summaries(2 * static_cast<size_t>(size));
  group.allgather(Buffer(summary, 2), Buffer(summaries.data(), summaries.size()), ag)->wait();
  std::vector<int> differing;
  uint64_t longest = 0;
  for (int r = 0; r < size; ++r) {
    const uint64_t* s = &summaries[2 * static_cast<size_t>(r)];
    if (s[0] != summaries[0] || s[1] != summaries[1]) differing.push_back(r);
    longest = std::max(longest, s[1]);
  }
  if (differing.empty()) return;

  // Round 2 (every rank takes it: all saw the same summaries): the whole descriptions.
  std::vector<uint8_t> padded(longest, 0);
  std::copy(mine.begin(), mine.end(), padded.begin());
  std::vector<uint8_t> all(longest * static_cast<size_t>(size));
  group.allgather(Buffer(padded.data(), padded.size()), Buffer(all.data(), all.size()), ag)->wait();
  auto layout_of = [&](int r) {
    return decode(all.data() + longest * static_cast<size_t>(r), summaries[2 * static_cast<size_t>(r) + 1]);
  };
  const int culprit = differing.front();
  std::string ranks;
  for (int r : differing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const std::string message = "kolo: DistributedDataParallel: ranks disagree on the parameter layout: " +
                              first_difference(layout_of(0), layout_of(culprit), culprit) + " (rank" +
                              (differing.size() > 1 ? "s " : " ") + ranks + " differ" +
                              (differing.size() > 1 ? "" : "s") + " from rank 0)";
  throw MismatchError(message, group.rank() == culprit ? 0 : culprit);
}

}  // namespace kolo::ddp
