#include "evaluate.hpp"

#include <algorithm>
#include <vector>

namespace kolo::train {

double validation_loss(gpt::Model<float>& model, ProcessGroup& group, const TokenWindows& windows, int samples,
                       int batch) {
  const size_t total = std::min(size_t(samples), windows.count());
  const size_t ranks = size_t(group.size());
  std::vector<size_t> mine;
  for (size_t i = size_t(group.rank()); i < total; i += ranks) mine.push_back(i);
  double sums[2] = {0, 0};  // loss * windows, windows
  std::vector<int> inputs, targets;
  for (size_t start = 0; start < mine.size(); start += size_t(batch)) {
    const size_t n = std::min(size_t(batch), mine.size() - start);
    inputs.clear();
    targets.clear();
    for (size_t i = 0; i < n; ++i) windows.append(mine[start + i], inputs, targets);
    sums[0] += model.forward(inputs.data(), targets.data(), int(n), model.config().seq) * double(n);
    sums[1] += double(n);
  }
  group.allreduce(Buffer(sums, 2))->wait();
  return sums[1] > 0 ? sums[0] / sums[1] : 0;
}

double mean_over_samples(ProcessGroup& group, double value, size_t count, size_t total) {
  if (group.size() == 1) return value;
  double weighted = value * double(count);
  group.allreduce(Buffer(&weighted, 1))->wait();
  return weighted / double(total);
}

double min_over_ranks(ProcessGroup& group, double value) {
  AllreduceOptions opts;
  opts.op = ReduceKind::min;
  group.allreduce(Buffer(&value, 1), opts)->wait();
  return value;
}

}  // namespace kolo::train
