// plan_ddp_buckets: parameters in reverse order, grouped into contiguous ranges of the flat
// gradient buffer. Reverse order because backward produces the last layers' gradients first:
// the first bucket is small so that communication starts early, later ones are large so that
// per-collective latency is paid rarely.
#include <string>

#include "kolo/ddp.hpp"
#include "kolo/error.hpp"

namespace kolo {

namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw InvalidArgument("kolo: DistributedDataParallel: " + why);
}

std::string describe(const DdpParam& p, size_t index) {
  return "parameter #" + std::to_string(index) + " '" + p.name + "' [" + std::to_string(p.offset) + ", " +
         std::to_string(p.offset + p.count) + ")";
}

// Buckets are ranges of the buffer only if parameters lie in ascending, disjoint order.
void check_layout(const std::vector<DdpParam>& layout, size_t total) {
  size_t end_of_previous = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    const DdpParam& p = layout[i];
    if (p.count > total || p.offset > total - p.count)
      refuse(describe(p, i) + " lies outside the buffers of " + std::to_string(total) + " elements");
    if (p.offset < end_of_previous)
      refuse(describe(p, i) + " starts before the end (" + std::to_string(end_of_previous) +
             ") of the previous parameter; the layout must list disjoint ranges in ascending order");
    end_of_previous = p.offset + p.count;
  }
}

}  // namespace

std::vector<DdpBucket> plan_ddp_buckets(const std::vector<DdpParam>& layout, size_t total, const DdpOptions& opts) {
  check_layout(layout, total);
  if (opts.first_bucket_bytes == 0 || opts.bucket_bytes == 0) refuse("bucket sizes must be positive");
  std::vector<DdpBucket> buckets;
  DdpBucket open;
  size_t open_end = 0;  // end of the open bucket's range (its highest parameter's end)
  for (size_t i = layout.size(); i-- > 0;) {
    const DdpParam& p = layout[i];
    if (open.params.empty()) open_end = p.offset + p.count;
    open.params.push_back(i);
    open.offset = p.offset;
    open.count = open_end - p.offset;
    const size_t limit = buckets.empty() ? opts.first_bucket_bytes : opts.bucket_bytes;
    if (open.count * sizeof(float) >= limit) {
      buckets.push_back(std::move(open));
      open = DdpBucket{};
    }
  }
  if (!open.params.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace kolo
