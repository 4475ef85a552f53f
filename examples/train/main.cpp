// kolo-train: data-parallel training of a small GPT-style byte-level transformer over kolo.
//
//   kolorun -n 2 build/examples/train/kolo-train --steps 300
//
// Every rank builds the same model from the same seed, the reducer checks that the layouts agree
// and broadcasts rank 0's weights, and then each step:
//   1. the sampler hands this rank its disjoint share of the global batch,
//   2. forward/backward over the share's micro-batches; the last backward starts each bucket's
//      all-reduce (or reduce-scatter, --zero 1) as soon as its gradients are final,
//   3. the reducer waits for the averaged gradients (or this rank's shard of them),
//   4. the global gradient norm is clipped and AdamW updates the weights (--zero 1: each rank
//      its shard, then the weights are all-gathered); see parallel_optimizer.hpp.
// Rank 0 prints a line per step, evaluates, writes checkpoints, and at the end prints the
// throughput summary, a text sample and the loss curve. With --elastic, a rank lost mid-run
// shrinks the group instead of ending the job (elastic.hpp), and a replacement (kolorun --replace,
// KOLO_JOIN=1) joins at a step boundary: rank 0 sends it the state and the group grows back.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "blas_core_choice.hpp"
#include "checkpoint.hpp"
#include "corpus.hpp"
#include "distributed_sampler.hpp"
#include "elastic.hpp"
#include "evaluate.hpp"
#include "kolo/kolo.hpp"
#include "loss_plot.hpp"
#include "lr_schedule.hpp"
#include "memory_report.hpp"
#include "model/model.hpp"
#ifdef KOLO_TRAIN_CUDA
#include "model/cuda/cuda_support.hpp"
#endif
#include "parallel_optimizer.hpp"
#include "rng.hpp"
#include "step_report.hpp"
#include "text_generator.hpp"
#include "train_options.hpp"

namespace kolo::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The world group: from the launcher's environment, or a group of one without a launcher (an
// in-process store, so no port is taken and several single-rank runs can coexist).
std::shared_ptr<ProcessGroup> join_world() {
  const LaunchEnv env = read_launch_env();
  // A replacement for a lost rank (kolorun --replace): let in by the survivors' grow().
  if (env.join) return join_from_env();
  if (env.source == "default" && env.world_size == 1) return ProcessGroup::create(make_hash_store(), 0, 1);
  return init_from_env();
}

int default_blas_threads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, read_launch_env().local_world_size));
}

void write_params(const std::string& path, const gpt::Model<float>& model) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(model.params()), std::streamsize(model.num_params() * sizeof(float)));
  if (!out) throw Error("cannot write --dump-params " + path);
}

class Trainer {
 public:
  // `joined`: this process replaces a lost rank (join_world joined a grown group): run() takes the
  // whole state from rank 0 instead of starting from the seed or a checkpoint.
  Trainer(const TrainOptions& opt, std::shared_ptr<ProcessGroup> group, bool joined)
      : opt_(opt),
        group_(std::move(group)),
        joined_(joined),
        launch_rank_(joined ? read_launch_env().rank : group_->rank()),
        rank_(group_->rank()),
        ranks_(group_->size()),
        text_(load_corpus(opt.data)),
        split_(split_tokens(text_, opt.val_fraction, opt.seq)),
        train_windows_(split_.train, opt.seq),
        val_windows_(split_.validation, opt.seq),
        model_(gpt::Config{256, opt.seq, opt.layers, opt.heads, opt.dim}),
        // The launch's size sets the global batch; a joiner's group may be of another size.
        global_batch_(size_t(joined ? read_launch_env().world_size : ranks_) * size_t(opt.batch) * size_t(opt.accum)),
        full_ranks_(int(global_batch_ / (size_t(opt.batch) * size_t(opt.accum)))),
        sampler_(train_windows_.count(), opt.seed, rank_, ranks_, global_batch_, opt.elastic),
        rng_(Rng::mix(opt.seed, 0x5eed)) {
    schedule_.peak = opt.lr;
    schedule_.minimum = opt.min_lr >= 0 ? opt.min_lr : opt.lr / 10;
    schedule_.warmup_steps = uint64_t(opt.warmup >= 0 ? opt.warmup : std::min(100, opt.steps / 10));
    schedule_.total_steps = uint64_t(opt.steps);
    model_.init(opt.seed);
    if (opt.resume && !joined) resume();
  }

  void run() {
    uint64_t start = first_step_;  // first_step_ stays 0 for a joiner: no checkpoint was resumed
    if (joined_) {
      start = welcome(TrainState{});  // the members' grow() let us in: rank 0 sends the rest
    } else {
      // Collective: checks that every rank built the same layout, then broadcasts rank 0's weights.
      optimizer_ = make_data_parallel_optimizer(opt_, group_, model_, resumed_adam_ ? &*resumed_adam_ : nullptr);
      resumed_adam_.reset();  // with --zero 1 this rank keeps only its shard of it
      print_banner();
      if (opt_.elastic) remember(first_step_);
    }
    for (uint64_t step = start; step < uint64_t(opt_.steps);) {
      try {
        // The step boundary: every rank of the group reaches it with the same `step` (once).
        if (opt_.elastic && step != checked_boundary_) {
          checked_boundary_ = step;
          grow_if_joiners_wait(step);
        }
        train_one_step(step);
        const uint64_t done = ++step;
        if (opt_.elastic) remember(done);
        if (opt_.eval_every > 0 && done % uint64_t(opt_.eval_every) == 0) evaluate(done);
        if (opt_.ckpt_every > 0 && done % uint64_t(opt_.ckpt_every) == 0 && done < uint64_t(opt_.steps))
          checkpoint(done);
      } catch (const std::exception& e) {
        if (!opt_.elastic || !is_rank_loss(e)) throw;
        step = recover(e);
      }
    }
    // Before the final evaluation and checkpoint, whose gathered state is not training's.
    say(memory_report(*group_, optimizer_->state_bytes()));
    finish_run();
  }

  // The step being trained (1-based), 0 before the first: for error messages.
  uint64_t current_step() const { return current_step_; }
  // The group training runs on: the world, or after --elastic shrank it, the survivors'.
  const std::shared_ptr<ProcessGroup>& group() const { return group_; }

 private:
  void train_one_step(uint64_t step) {
    // The launch rank, and only in the world group: after an --elastic shrink the survivors'
    // ranks shift, and a retrained step must not kill again.
    if (opt_.die_at_step > 0 && step + 1 == uint64_t(opt_.die_at_step) && launch_rank_ == opt_.die_rank &&
        group_->generation() == 0) {
      std::fprintf(stderr, "kolo-train rank %d: --die-at-step %d: killing myself %d us into it\n", rank_,
                   opt_.die_at_step, opt_.die_after_us);
      if (opt_.die_after_us == 0) std::raise(SIGKILL);
      // Mid-step: from a timer, wherever the step has got to (forward, backward, a collective).
      std::thread([us = opt_.die_after_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
        std::raise(SIGKILL);
      }).detach();
    }
    current_step_ = step + 1;
    const auto start = Clock::now();
    const std::vector<size_t> samples = sampler_.next_step();
    const double local_loss = optimizer_->forward_backward(train_windows_, samples, global_batch_, opt_.accum);
    const double lr = schedule_.at(step);
    const double norm = optimizer_->update(lr, opt_.clip);
    const auto comm = optimizer_->comm_stats();  // after update(): --zero 1 all-gathers there
    const double loss = mean_over_samples(*group_, local_loss, samples.size(), global_batch_);

    StepRecord record;
    record.step = step + 1;
    record.total_steps = uint64_t(opt_.steps);
    record.loss = loss;
    record.lr = lr;
    record.grad_norm = norm;
    record.seconds = seconds_since(start);
    record.tokens = uint64_t(global_batch_) * uint64_t(opt_.seq);
    record.comm_seconds = comm.comm_seconds;
    record.exposed_seconds = comm.exposed_wait_seconds;
    stats_.add(record);
    train_losses_.push_back({step + 1, loss});
    const std::string line =
        format_step_line(record, stats_.eta_seconds(step + 1 - first_step_, uint64_t(opt_.steps) - first_step_));
    say(line);
    if (opt_.elastic) memory_.keep_line(step + 1, line);
  }

  void evaluate(uint64_t step) {
    optimizer_->params_to_host();  // --device cuda: evaluation runs on the host mirror
    const double loss = validation_loss(model_, *group_, val_windows_, opt_.eval_samples, opt_.batch);
    validation_losses_.push_back({step, loss});
    char line[96];
    std::snprintf(line, sizeof line, "eval step %llu val_loss %.6f", static_cast<unsigned long long>(step), loss);
    say(line);
  }

  void checkpoint(uint64_t step) {
    optimizer_->params_to_host();
    AdamState adam = optimizer_->state_on_rank0();  // collective with --zero 1
    if (rank_ != 0) return;
    say("checkpoint " + save_checkpoint(opt_.ckpt, state_after(step, std::move(adam))));
  }

  // --elastic: what a rollback to `step` (just completed, or the run's start) restores. --zero 0
  // keeps the whole state in memory; --zero 1 cannot (a lost rank takes its AdamW shard along),
  // so it rolls back to the newest checkpoint instead (or the start), and keeps nothing here.
  void remember(uint64_t step) {
    if (opt_.zero == 1) return;
    std::optional<AdamState> adam = optimizer_->whole_state_here();
    if (!adam) throw Error("kolo-train --elastic: this optimizer holds no whole AdamW state to roll back to");
    TrainState state;
    state.step = step;
    state.seed = seed_;
    state.sampler = sampler_.position();
    state.rng = rng_.state();
    state.adam_steps = adam->steps;
    state.params.assign(model_.params(), model_.params() + model_.num_params());
    state.adam_m = std::move(adam->m);
    state.adam_v = std::move(adam->v);
    state.train_losses = train_losses_;
    state.validation_losses = validation_losses_;
    memory_.keep(std::move(state));
  }

  // --elastic, after a collective failed because a rank was lost: shrink to the survivors, roll
  // back to the last step they all completed, rebuild the reducer on the new group. Returns the
  // step to continue from. A failure here (no survivors agree in time, a second loss during the
  // shrink) ends the run as any other error does.
  uint64_t recover(const std::exception& failure) {
    const uint64_t failed_step = current_step_;
    const int old_rank = rank_, old_ranks = ranks_;
    std::shared_ptr<ProcessGroup> survivors = group_->shrink();  // aborts the old group first
    optimizer_.reset();  // its reducer belongs to the old group
    group_ = std::move(survivors);
    rank_ = group_->rank();
    ranks_ = group_->size();
    std::string from;
    TrainState state;
    if (opt_.zero == 1) {
      const uint64_t newest = newest_checkpoint_written(opt_.ckpt, first_step_, current_step_, opt_.ckpt_every);
      state = rollback_point_zero1(uint64_t(min_over_ranks(*group_, double(newest))), from);
    } else {
      state = memory_.take(uint64_t(min_over_ranks(*group_, double(memory_.newest()))));
      from = "its state in memory";
    }
    adopt(state);
    // A new printing rank repeats the restored step's line: the old one may have died between
    // completing that step and printing it.
    if (const std::string line = memory_.line(state.step); old_rank != 0 && !line.empty()) say(line);
    memory_.clear();
    remember(state.step);
    current_step_ = state.step;
    checked_boundary_ = kNoBoundary;  // the survivors check at the restored step's boundary, and
    wait_for_joiner_ = true;          // wait there (--grow-wait) for a replacement
    say("elastic: " + blamed_rank(failure) + " lost during step " + std::to_string(failed_step) + " (" + failure.what() +
        "); " + std::to_string(ranks_) + " of " + std::to_string(old_ranks) + " ranks go on (this was rank " +
        std::to_string(old_rank) + ", now " + std::to_string(rank_) + ") from step " + std::to_string(state.step) +
        ", restored from " + from + "; global batch " + std::to_string(global_batch_) + " as " +
        shares_text(global_batch_, ranks_));
    return state.step;
  }

  // --elastic, at the boundary after `step` completed steps, on a group smaller than launched:
  // let a waiting replacement in (ProcessGroup::grow; with nobody waiting that costs rank 0 one
  // store call and a 32-byte broadcast), hand it the whole state and carry on with the global
  // batch split evenly again. Every rank of the group calls it at the same boundary.
  void grow_if_joiners_wait(uint64_t step) {
    if (ranks_ >= full_ranks_) return;
    GrowOptions how;
    how.max_joiners = full_ranks_ - ranks_;
    if (wait_for_joiner_) how.wait = std::chrono::milliseconds(int64_t(opt_.grow_wait * 1000));
    wait_for_joiner_ = false;
    const auto asked = Clock::now();
    std::shared_ptr<ProcessGroup> bigger = group_->grow(how);
    if (!bigger) return;
    const int old_ranks = ranks_, joiners = bigger->size() - ranks_;
    // The whole AdamW state on rank 0: a copy here (--zero 0), or gathered from the shards over
    // the old group, which is still whole (--zero 1).
    optimizer_->params_to_host();
    std::optional<AdamState> adam = optimizer_->whole_state_here();
    if (!adam) adam = optimizer_->state_on_rank0();
    TrainState state;
    if (rank_ == 0) state = state_after(step, std::move(*adam));
    optimizer_.reset();  // its reducer belongs to the old group
    std::shared_ptr<ProcessGroup> old = std::move(group_);
    group_ = std::move(bigger);
    old->shutdown();  // collective over the old members, who all are here
    welcome(std::move(state));
    say("elastic: " + std::to_string(joiners) + " rank(s) joined at step " + std::to_string(step) + "; " +
        std::to_string(ranks_) + " of " + std::to_string(full_ranks_) + " ranks go on (were " + std::to_string(old_ranks) +
        ") from step " + std::to_string(step) + ", the joiners given rank 0's state; global batch " +
        std::to_string(global_batch_) + " as " + shares_text(global_batch_, ranks_) + " (" +
        std::to_string(seconds_since(asked)) + " s from the boundary's grow call until training resumed)");
  }

  // Collective over a group that just grew: rank 0 sends `state` (the state after its completed
  // steps: what a checkpoint holds), every rank takes it (the members hold it already; with
  // --zero 1 they also need the whole AdamW state to cut their new shard from) and rebuilds the
  // reducer. Returns the step training continues from.
  uint64_t welcome(TrainState state) {
    rank_ = group_->rank();
    ranks_ = group_->size();
    std::string bytes = rank_ == 0 ? encode_train_state(state) : std::string();
    uint64_t n = bytes.size();
    group_->broadcast(Buffer(&n, 1))->wait();
    bytes.resize(n);
    group_->broadcast(Buffer(reinterpret_cast<uint8_t*>(bytes.data()), n))->wait();
    state = decode_train_state(bytes, "the state rank 0 sent when the group grew", shape());
    global_batch_ = state.global_batch;
    adopt(state);
    memory_.clear();
    remember(state.step);
    current_step_ = state.step;
    checked_boundary_ = state.step;  // this boundary's check is done, on members and joiners alike
    return state.step;
  }

  // Takes over `state` (a rollback's, or what rank 0 sent a grown group) on this rank's current
  // group: weights, sampler, generator, losses, and the optimizer made anew, which is collective
  // on the group (it checks the layouts and broadcasts the same weights).
  void adopt(TrainState& state) {
    std::copy(state.params.begin(), state.params.end(), model_.params());
    seed_ = state.seed;
    sampler_ = DistributedSampler(train_windows_.count(), seed_, rank_, ranks_, global_batch_, true);
    sampler_.set_position(state.sampler);
    rng_.set_state(state.rng);
    train_losses_ = std::move(state.train_losses);
    validation_losses_ = std::move(state.validation_losses);
    AdamState adam{state.adam_steps, std::move(state.adam_m), std::move(state.adam_v)};
    optimizer_ = make_data_parallel_optimizer(opt_, group_, model_, adam.m.empty() ? nullptr : &adam);
  }

  // The state after `step` completed steps, as a checkpoint holds it.
  TrainState state_after(uint64_t step, AdamState adam) const {
    TrainState state;
    state.shape = shape();
    state.step = step;
    state.global_batch = global_batch_;
    state.seed = seed_;
    state.sampler = sampler_.position();
    state.rng = rng_.state();
    state.adam_steps = adam.steps;
    state.params.assign(model_.params(), model_.params() + model_.num_params());
    state.adam_m = std::move(adam.m);
    state.adam_v = std::move(adam.v);
    state.train_losses = train_losses_;
    state.validation_losses = validation_losses_;
    return state;
  }

  // --zero 1's rollback point: checkpoint `step`, or for 0 the start (the seed's initial weights
  // and a fresh AdamW).
  TrainState rollback_point_zero1(uint64_t step, std::string& from) {
    if (step == 0 && first_step_ > 0)
      throw Error("kolo-train --elastic --zero 1: the checkpoint this run resumed from (step " +
                  std::to_string(first_step_) + ") is gone from " + opt_.ckpt + ", and no newer one was written");
    if (step == 0) {
      model_.init(opt_.seed);
      TrainState start;
      start.seed = opt_.seed;
      start.rng = Rng(Rng::mix(opt_.seed, 0x5eed)).state();
      start.params.assign(model_.params(), model_.params() + model_.num_params());
      from = "the start (no checkpoint yet)";
      return start;
    }
    const std::string path = checkpoint_path(opt_.ckpt, step);
    TrainState state = load_checkpoint(path, shape());
    from = path;
    return state;
  }

  void finish_run() {
    optimizer_->params_to_host();  // for --dump-params and the sample
    const uint64_t steps = uint64_t(opt_.steps);
    if (validation_losses_.empty() || validation_losses_.back().step != steps) evaluate(steps);
    if (stats_.measured_steps() > 0 || first_step_ < steps) {
      char line[64];
      std::snprintf(line, sizeof line, "tokens/s %.0f", stats_.tokens_per_second());
      say(line);
      // The split the run ended with (after --elastic shrank or grew the group, not the launch's).
      say(format_summary(stats_, ranks_, local_batch_text(global_batch_, ranks_, opt_.accum), opt_.accum, opt_.seq,
                         model_.num_params()));
    }
    if (first_step_ < steps) checkpoint(steps);
    if (rank_ != 0) return;
    if (!opt_.dump_params.empty()) write_params(opt_.dump_params, model_);
    if (opt_.sample_chars > 0) {
      char heading[64] = "sample (greedy):";
      if (opt_.temperature > 0) std::snprintf(heading, sizeof heading, "sample (temperature %g):", opt_.temperature);
      say(heading + ("\n" + opt_.prompt) +
          generate_text(model_, opt_.prompt, opt_.sample_chars, opt_.temperature, rng_));
    }
    if (opt_.plot != "none") {
      const std::string png = opt_.plot.empty() ? opt_.ckpt + "/loss.png" : opt_.plot;
      say(write_loss_plot(png, train_losses_, validation_losses_));
    }
  }

  // --resume: every rank loads the newest checkpoint, so all continue from the same state. The
  // optimizer takes AdamW's state (or its shard of it) when run() makes it.
  void resume() {
    auto path = latest_checkpoint(opt_.ckpt);
    if (!path) throw InvalidArgument("--resume: no checkpoint (step-*.ckpt) in " + opt_.ckpt);
    TrainState state = load_checkpoint(*path, shape());
    std::copy(state.params.begin(), state.params.end(), model_.params());
    resumed_adam_ = AdamState{state.adam_steps, std::move(state.adam_m), std::move(state.adam_v)};
    if (state.seed != opt_.seed) {
      say("note: the checkpoint was trained with --seed " + std::to_string(state.seed) + "; its data order continues");
      seed_ = state.seed;
      sampler_ = DistributedSampler(train_windows_.count(), seed_, rank_, ranks_, global_batch_);
    }
    sampler_.set_position(state.sampler);
    rng_.set_state(state.rng);
    train_losses_ = std::move(state.train_losses);
    validation_losses_ = std::move(state.validation_losses);
    first_step_ = state.step;
    if (state.global_batch != global_batch_)
      say("note: the checkpoint used a global batch of " + std::to_string(state.global_batch) + ", this run " +
          std::to_string(global_batch_) + ": training continues, but not as the original run would have");
    say("resumed from " + *path + " at step " + std::to_string(first_step_));
  }

  CheckpointShape shape() const {
    return {256, opt_.seq, opt_.layers, opt_.heads, opt_.dim, model_.num_params(), corpus_fingerprint(text_)};
  }

  void print_banner() {
    const size_t buckets = optimizer_->bucket_count();
    char line[600];
    std::snprintf(line, sizeof line,
                  "kolo-train: %d rank%s, %d BLAS thread%s each; model %d layers, dim %d, %d heads, seq %d: %zu "
                  "parameters in %zu %s bucket%s\n"
                  "data %s: %zu bytes, %zu training windows, %zu validation windows; global batch %zu "
                  "(%d ranks x %d x accum %d) = %zu tokens per step, %zu steps per epoch",
                  ranks_, ranks_ == 1 ? "" : "s", gpt::blas_threads(), gpt::blas_threads() == 1 ? "" : "s",
                  opt_.layers, opt_.dim, opt_.heads, opt_.seq, model_.num_params(), buckets, optimizer_->mode(),
                  buckets == 1 ? "" : "s",
                  opt_.data.c_str(), text_.size(), train_windows_.count(), val_windows_.count(), global_batch_, ranks_,
                  opt_.batch, opt_.accum, global_batch_ * size_t(opt_.seq), sampler_.steps_per_epoch());
    say(line);
  }

  void say(const std::string& line) const {
    if (rank_ != 0) return;
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  static constexpr uint64_t kNoBoundary = UINT64_MAX;
  const TrainOptions opt_;
  std::shared_ptr<ProcessGroup> group_;
  const bool joined_;      // this process replaced a lost rank
  const int launch_rank_;  // in the world group (a replacement: the lost rank's)
  int rank_, ranks_;       // change when --elastic shrinks the group
  const std::string text_;
  const TokenSplit split_;
  const TokenWindows train_windows_, val_windows_;
  gpt::Model<float> model_;
  std::unique_ptr<DataParallelOptimizer> optimizer_;  // made by run(): its constructor is collective
  std::optional<AdamState> resumed_adam_;             // from --resume, until run() hands it over
  LrSchedule schedule_;
  size_t global_batch_;  // set at launch; a joiner takes rank 0's
  const int full_ranks_;  // the launch's size: --elastic grows the group back up to it
  uint64_t seed_ = opt_.seed;
  DistributedSampler sampler_;
  Rng rng_;
  uint64_t first_step_ = 0, current_step_ = 0;
  RunStats stats_;
  std::vector<LossPoint> train_losses_, validation_losses_;
  StepMemory memory_;  // --elastic --zero 0: the last completed steps
  uint64_t checked_boundary_ = kNoBoundary;  // --elastic: the step boundary whose grow check is done
  bool wait_for_joiner_ = false;             // --elastic: the next check waits --grow-wait (after a loss)
};

}  // namespace

// Why --device cuda cannot run here, "" when it can: a build without CUDA, no usable GPU, or an
// option whose code path is host-only (ZeRO-1's shard updates, the compression hooks).
std::string cuda_refusal(const TrainOptions& opt) {
#ifdef KOLO_TRAIN_CUDA
  if (std::string why = gpt::cuda::unavailable_reason(); !why.empty()) return "no usable GPU: " + why;
  if (opt.zero == 1) return "--zero 1 updates its shard on the host; use --zero 0 on the GPU";
  if (opt.compression != "none") return "--compression packs gradients on the host; use --compression none on the GPU";
  return "";
#else
  (void)opt;
  return "this kolo-train was built without CUDA (configure with nvcc and the CUDA toolkit: meson -Dcuda=enabled); "
         "use --device cpu";
#endif
}

// The line saying which GPU this rank trains on.
std::string cuda_device_line() {
#ifdef KOLO_TRAIN_CUDA
  const int device = read_launch_env().local_rank % gpt::cuda::device_count();
  return "kolo-train: --device cuda: rank 0 on cuda:" + std::to_string(device) + ", " + gpt::cuda::device_name(device);
#else
  return "";
#endif
}

}  // namespace kolo::train

int main(int argc, char** argv) {
  using namespace kolo::train;
  TrainOptions opt;
  try {
    opt = parse_train_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const kolo::InvalidArgument& e) {
    std::fprintf(stderr, "kolo-train: %s\n", e.what());
    return 2;
  }
  if (opt.help) {
    std::fputs(train_usage().c_str(), stdout);
    return 0;
  }
  if (opt.device == "cuda") {
    if (const std::string why = cuda_refusal(opt); !why.empty()) {
      std::fprintf(stderr, "kolo-train: --device cuda: %s\n", why.c_str());
      return 2;
    }
  }
  apply_blas_core_choice(opt.blas_core, argv);
  kolo::gpt::set_blas_threads(opt.threads > 0 ? opt.threads : default_blas_threads());
  const bool replacement = kolo::read_launch_env().join;  // KOLO_JOIN=1: prints nothing of rank 0's
  if (kolo::read_launch_env().rank == 0 && !replacement)
    std::printf("kolo-train: OpenBLAS kernels %s, %d thread(s) per rank\n", kolo::gpt::blas_core_name().c_str(),
                kolo::gpt::blas_threads());
  if (opt.device == "cuda" && kolo::read_launch_env().rank == 0 && !replacement) std::printf("%s\n", cuda_device_line().c_str());

  std::shared_ptr<kolo::ProcessGroup> group;
  std::unique_ptr<Trainer> trainer;
  try {
    try {
      group = join_world();
    } catch (const kolo::ExcludedError& e) {
      if (!replacement) throw;
      // Too late: the run this process was to rejoin has ended. Nothing was lost.
      std::fprintf(stderr, "kolo-train: a replacement that was not needed: %s\n", e.what());
      return 0;
    }
    trainer = std::make_unique<Trainer>(opt, group, replacement);
    trainer->run();
    group = trainer->group();  // --elastic: the survivors' group; the world was aborted by the shrink
    trainer.reset();
    group->shutdown();
    return 0;
  } catch (const std::exception& e) {
    if (trainer) group = trainer->group();
    const int rank = group ? group->rank() : -1;
    std::string where = trainer && trainer->current_step() > 0
                            ? " at step " + std::to_string(trainer->current_step())
                            : std::string(" before the first step");
    std::string culprit;
    if (auto* peer = dynamic_cast<const kolo::PeerError*>(&e); peer != nullptr && peer->peer_rank() >= 0)
      culprit = " (caused by rank " + std::to_string(peer->peer_rank()) + ")";
    std::fprintf(stderr, "kolo-train rank %d: training stopped%s%s: %s\n", rank, where.c_str(), culprit.c_str(),
                 e.what());
    // Tell the other ranks at once instead of letting them wait for their timeout, then leave
    // without the orderly shutdown the destructors would attempt (it could only fail, noisily).
    if (group) group->abort("rank " + std::to_string(rank) + " failed: " + e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
  }
}
