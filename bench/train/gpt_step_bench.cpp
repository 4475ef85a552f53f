// kolo-bench-gpt-step: forward + backward time of one training step of the example trainer's
// GPT model (examples/train/model) on one rank. Compare with bench/train/torch_step.py, which
// times the same model and batch in PyTorch; both default to one thread.
//
//   kolo-bench-gpt-step [--batch 8] [--seq 64] [--layers 4] [--heads 4] [--dim 128] [--vocab 256]
//                       [--steps 30] [--warmup 3] [--threads 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.hpp"
#include "model/model.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  kolo::gpt::Config config{256, 64, 4, 4, 128};
  int batch = 8;
  int steps = 30;
  int warmup = 3;
  int threads = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  bool help = false;
  CLI::App app{"", "kolo-bench-gpt-step"};
  kolo::cli::configure(app,
                       "usage: kolo-bench-gpt-step [--batch N] [--seq N] [--layers N] [--heads N] [--dim N] [--vocab N]\n"
                       "                           [--steps N] [--warmup N] [--threads N]\n");
  app.description("Forward + backward time of one training step of the example trainer's GPT model on one rank.");
  const std::pair<const char*, std::pair<int*, const char*>> flags[] = {
      {"--batch", {&o.batch, "sequences per step, >= 1 (8)"}},
      {"--seq", {&o.config.seq, "context length (64)"}},
      {"--layers", {&o.config.layers, "transformer blocks (4)"}},
      {"--heads", {&o.config.heads, "attention heads (4)"}},
      {"--dim", {&o.config.dim, "embedding width (128)"}},
      {"--vocab", {&o.config.vocab, "vocabulary size (256)"}},
      {"--steps", {&o.steps, "timed steps, >= 1 (30)"}},
      {"--warmup", {&o.warmup, "untimed steps first (3)"}},
      {"--threads", {&o.threads, "BLAS threads (1)"}},
  };
  for (const auto& [name, field] : flags) app.add_option(name, *field.first, field.second)->type_name("N");
  kolo::cli::add_help(app, help);
  try {
    kolo::cli::parse(app, std::vector<std::string>(argv + 1, argv + argc));
    for (const auto& [name, field] : flags)
      if (*field.first < 0) throw CLI::ValidationError(std::string(name) + " must not be negative");
    if (o.steps < 1 || o.batch < 1) throw CLI::ValidationError("--steps/--batch must be >= 1");
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "kolo-bench-gpt-step: %s\n%s", e.what(), kolo::cli::help(app).c_str());
    std::exit(2);
  }
  if (help) {
    std::fputs(kolo::cli::help(app).c_str(), stdout);
    std::exit(0);
  }
  return o;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  kolo::gpt::set_blas_threads(o.threads);
  kolo::gpt::Model<float> model(o.config);
  model.init(1);
  const int B = o.batch, T = o.config.seq;
  std::vector<int> tokens(size_t(B) * T), targets(size_t(B) * T);
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> tok(0, o.config.vocab - 1);
  for (int& t : tokens) t = tok(gen);
  for (int& t : targets) t = tok(gen);

  std::vector<double> fwd, bwd, step;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    model.zero_grad();
    const auto t0 = Clock::now();
    model.forward(tokens.data(), targets.data(), B, T);
    const double f = ms_since(t0);
    const auto t1 = Clock::now();
    model.backward(1.0f, nullptr);
    const double b = ms_since(t1);
    if (i < o.warmup) continue;
    fwd.push_back(f);
    bwd.push_back(b);
    step.push_back(f + b);
  }
  std::printf("kolo gpt: params %zu, batch %d x seq %d, layers %d, heads %d, dim %d, vocab %d\n",
              model.num_params(), B, T, o.config.layers, o.config.heads, o.config.dim, o.config.vocab);
  std::printf("openblas core %s, %d thread(s)\n", kolo::gpt::blas_core_name().c_str(), kolo::gpt::blas_threads());
  std::printf("median over %d steps: forward %.2f ms, backward %.2f ms, forward+backward %.2f ms (min %.2f)\n",
              o.steps, median(fwd), median(bwd), median(step), *std::min_element(step.begin(), step.end()));
  return 0;
}
