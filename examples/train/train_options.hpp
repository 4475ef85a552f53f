// kolo-train's command line: every flag, its default and its check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::train {

struct TrainOptions {
  // Model (kolo::gpt::Config; the vocabulary is always 256 byte values).
  int seq = 64, layers = 2, heads = 4, dim = 64;
  // Data and batches.
  std::string data = "kjv";
  double val_fraction = 0.05;
  int batch = 16;  // per rank, per micro-step
  int accum = 1;   // micro-steps per optimizer step
  // Optimisation.
  int steps = 200;
  double lr = 1e-3;
  double min_lr = -1;    // < 0: lr / 10
  int warmup = -1;       // < 0: steps / 10, at most 100
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95;
  double clip = 1.0;     // <= 0: no clipping
  uint64_t seed = 1337;
  // Evaluation and output.
  int eval_every = 50;   // 0: only at the end
  int eval_samples = 64;
  std::string ckpt = "kolo-train-ckpt";
  int ckpt_every = 100;  // 0: only at the end
  bool resume = false;
  std::string plot;      // "": <ckpt>/loss.png; "none": no plot
  int sample_chars = 200;
  std::string prompt = "And God said";
  double temperature = 0.8;  // 0: greedy
  std::string dump_params;   // "": none
  // Execution.
  std::string device = "cpu";
  int threads = 0;  // BLAS threads per rank; 0: cores / ranks on this host
  std::string blas_core = "auto";  // see blas_core_choice.hpp
  double bucket_mb = 25, first_bucket_mb = 1;
  std::string compression = "none";
  int zero = 0;  // 1: ZeRO-1, AdamW's state sharded over the ranks (parallel_optimizer.hpp)
  bool elastic = false;  // a lost rank: the survivors shrink the group, roll back and go on (elastic.hpp)
  // --elastic, after a loss: how long the first step boundary waits for a replacement to join
  // (kolorun --replace starts one) before training on short-handed; later boundaries only check.
  double grow_wait = 0;
  // Fault injection for the tests: rank die_rank kills itself (SIGKILL) when step die_at_step begins.
  int die_at_step = 0;
  int die_rank = 1;
  int die_after_us = 0;  // > 0: that many microseconds into the step instead (mid-step)

  bool help = false;
};

// Parses argv[1..]; throws kolo::InvalidArgument naming the flag for anything malformed.
TrainOptions parse_train_options(const std::vector<std::string>& args);

std::string train_usage();

}  // namespace kolo::train
