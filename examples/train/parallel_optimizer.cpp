// What both data-parallel modes take from the command line, and the choice between them.
#include "parallel_optimizer.hpp"

#include "kolo/error.hpp"
#ifdef KOLO_TRAIN_CUDA
#include "model/cuda/cuda_support.hpp"
#endif

namespace kolo::train {

DdpOptions ddp_options(const TrainOptions& opt) {
  DdpOptions d;
  d.first_bucket_bytes = static_cast<size_t>(opt.first_bucket_mb * (1 << 20));
  d.bucket_bytes = static_cast<size_t>(opt.bucket_mb * (1 << 20));
  d.compression = opt.compression == "fp16"   ? GradCompression::float16
                  : opt.compression == "bf16" ? GradCompression::bfloat16
                                              : GradCompression::none;
  return d;
}

std::vector<DdpParam> ddp_layout(const std::vector<gpt::ParamInfo>& layout) {
  std::vector<DdpParam> params;
  for (const gpt::ParamInfo& p : layout) params.push_back({p.name, p.offset, p.count});
  return params;
}

AdamWConfig adamw_config(const TrainOptions& opt) {
  return AdamWConfig{float(opt.beta1), float(opt.beta2), 1e-8f, float(opt.weight_decay)};
}

std::unique_ptr<DataParallelOptimizer> make_data_parallel_optimizer(const TrainOptions& opt,
                                                                    std::shared_ptr<ProcessGroup> group,
                                                                    gpt::Model<float>& model,
                                                                    const AdamState* resumed) {
#ifdef KOLO_TRAIN_CUDA
  if (opt.device == "cuda") {
    // One GPU per local rank, as launchers assign them; ranks beyond the visible GPUs share them.
    const int device = read_launch_env().local_rank % gpt::cuda::device_count();
    return make_cuda_optimizer(opt, std::move(group), model, resumed, device);
  }
#endif
  if (opt.device != "cpu") throw InvalidArgument("--device " + opt.device + ": this kolo-train was built without CUDA");
  if (opt.zero == 1) return make_sharded_optimizer(opt, std::move(group), model, resumed);
  return make_replicated_optimizer(opt, std::move(group), model, resumed);
}

}  // namespace kolo::train
