#include "train_step.hpp"

#include <string>

#include "kolo/error.hpp"

namespace kolo::train {

template <class Reducer>
double forward_backward(gpt::Model<float>& model, Reducer& ddp, const TokenWindows& windows,
                        const std::vector<size_t>& samples, int batch, int accum) {
  if (samples.size() != size_t(batch) * size_t(accum))
    throw InvalidArgument("forward_backward: " + std::to_string(samples.size()) + " samples for batch " +
                          std::to_string(batch) + " x accum " + std::to_string(accum));
  const int seq = model.config().seq;
  const float scale = 1.0f / static_cast<float>(accum);
  model.zero_grad();
  double loss_sum = 0;
  std::vector<int> inputs, targets;
  for (int micro = 0; micro < accum; ++micro) {
    inputs.clear();
    targets.clear();
    for (int i = 0; i < batch; ++i) windows.append(samples[size_t(micro) * size_t(batch) + size_t(i)], inputs, targets);
    loss_sum += model.forward(inputs.data(), targets.data(), batch, seq);
    if (micro + 1 < accum) {
      auto local_only = ddp.no_sync();
      model.backward(scale, nullptr);
    } else {
      model.backward(scale, [&ddp](size_t param) { ddp.mark_grad_ready(param); });
    }
  }
  ddp.finish();
  return loss_sum / accum;
}

template double forward_backward(gpt::Model<float>&, DistributedDataParallel&, const TokenWindows&,
                                 const std::vector<size_t>&, int, int);
template double forward_backward(gpt::Model<float>&, ShardedDataParallel&, const TokenWindows&,
                                 const std::vector<size_t>&, int, int);

}  // namespace kolo::train
