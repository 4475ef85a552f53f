#include "train_options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "kolo/error.hpp"

namespace kolo::train {
namespace {

long long parse_integer(const std::string& flag, const std::string& text, long long low, long long high) {
  char* end = nullptr;
  errno = 0;
  long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || v < low || v > high)
    throw InvalidArgument(flag + " expects an integer from " + std::to_string(low) + " to " + std::to_string(high) +
                          ", got '" + text + "'");
  return v;
}

double parse_number(const std::string& flag, const std::string& text, double low, double high) {
  char* end = nullptr;
  double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < low || v > high)
    throw InvalidArgument(flag + " expects a number from " + std::to_string(low) + " to " + std::to_string(high) +
                          ", got '" + text + "'");
  return v;
}

std::string one_of(const std::string& flag, const std::string& text, std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (text == c) return text;
    list += list.empty() ? c : std::string("|") + c;
  }
  throw InvalidArgument(flag + " expects " + list + ", got '" + text + "'");
}

// Every flag that takes a value: its spelling, the value's name in --help, its group and text
// there (with the default), and what sets it (checking the value, naming the flag if it is bad).
using Setter = std::function<void(const std::string& flag, const std::string& value)>;
struct Flag {
  const char* name;
  const char* value_name;
  const char* group;
  const char* help;
  Setter set;
};

std::vector<Flag> value_flags(TrainOptions& o) {
  constexpr long long kBig = 1'000'000'000;
  auto integer = [](int& field, long long low, long long high) -> Setter {
    return [&field, low, high](const std::string& f, const std::string& v) { field = int(parse_integer(f, v, low, high)); };
  };
  auto number = [](double& field, double low, double high) -> Setter {
    return [&field, low, high](const std::string& f, const std::string& v) { field = parse_number(f, v, low, high); };
  };
  auto text = [](std::string& field) -> Setter { return [&field](const std::string&, const std::string& v) { field = v; }; };
  const char* model = "Model";
  const char* data = "Data";
  const char* optimisation = "Optimisation (AdamW, warmup + cosine schedule)";
  const char* output = "Evaluation and output (rank 0 prints and writes)";
  const char* execution = "Execution";
  const char* testing = "Testing";
  return {
      {"--seq", "T", model, "context length in bytes (64)", integer(o.seq, 1, 1 << 16)},
      {"--layers", "L", model, "transformer blocks (2)", integer(o.layers, 1, 1024)},
      {"--heads", "H", model, "attention heads, must divide --dim (4)", integer(o.heads, 1, 1024)},
      {"--dim", "D", model, "embedding width (64)", integer(o.dim, 1, 1 << 16)},
      {"--data", "PATH", data,
       "a text file, or \"kjv\": the King James Bible from Debian's\nbible-kjv package, read through `bible` (default kjv)",
       text(o.data)},
      {"--val-fraction", "F", data, "the last F of the text is the validation set (0.05)", number(o.val_fraction, 1e-6, 0.5)},
      {"--batch", "b", data, "sequences per rank per micro-step (16)", integer(o.batch, 1, 1 << 20)},
      {"--accum", "A", data,
       "micro-steps per optimizer step, gradients summed locally (1);\nglobal batch = ranks * b * A",
       integer(o.accum, 1, 1 << 16)},
      {"--steps", "S", optimisation, "optimizer steps (200)", integer(o.steps, 1, kBig)},
      {"--lr", "X", optimisation, "peak learning rate (1e-3)", number(o.lr, 0, 10)},
      {"--min-lr", "X", optimisation, "final learning rate (lr/10)", number(o.min_lr, 0, 10)},
      {"--warmup", "N", optimisation, "linear warmup steps (steps/10, at most 100)", integer(o.warmup, 0, kBig)},
      {"--weight-decay", "X", optimisation, "decoupled weight decay on weight matrices and embeddings (0.1)",
       number(o.weight_decay, 0, 10)},
      {"--beta1", "X", optimisation, "Adam's first moment decay (0.9)", number(o.beta1, 0, 0.999999)},
      {"--beta2", "X", optimisation, "Adam's second moment decay (0.95)", number(o.beta2, 0, 0.999999)},
      {"--clip", "X", optimisation, "clip the global gradient norm to X, 0 = off (1.0)", number(o.clip, 0, 1e9)},
      {"--seed", "N", optimisation, "seeds the initial weights, the data order and sampling (1337)",
       [&o](const std::string& f, const std::string& v) { o.seed = uint64_t(parse_integer(f, v, 0, INT64_MAX)); }},
      {"--eval-every", "N", output, "validation loss every N steps, 0 = only at the end (50)", integer(o.eval_every, 0, kBig)},
      {"--eval-samples", "N", output, "validation windows per evaluation (64)", integer(o.eval_samples, 1, 1 << 24)},
      {"--ckpt", "DIR", output, "checkpoint directory (kolo-train-ckpt)", text(o.ckpt)},
      {"--ckpt-every", "N", output, "checkpoint every N steps besides the end, 0 = end only (100)",
       integer(o.ckpt_every, 0, kBig)},
      {"--plot", "PATH", output, "loss-curve PNG via gnuplot (DIR/loss.png; \"none\" = no plot)", text(o.plot)},
      {"--sample-chars", "N", output, "characters of text generated at the end, 0 = none (200)",
       integer(o.sample_chars, 0, 1 << 20)},
      {"--prompt", "TEXT", output, "start of the generated text (\"And God said\")", text(o.prompt)},
      {"--temperature", "X", output, "sampling temperature, 0 = greedy (0.8)", number(o.temperature, 0, 100)},
      {"--dump-params", "FILE", output, "write the final flat float32 parameters to FILE", text(o.dump_params)},
      {"--device", "cpu|cuda", execution, "where the model runs (cuda: this rank's GPU, LOCAL_RANK % visible GPUs; builds with CUDA only)",
       [&o](const std::string& f, const std::string& v) { o.device = one_of(f, v, {"cpu", "cuda"}); }},
      {"--threads", "N", execution, "BLAS threads per rank (0 = cores / ranks on this host)", integer(o.threads, 0, 1024)},
      {"--blas-core", "C", execution,
       "OpenBLAS kernels: auto = detect the CPU, ignoring OPENBLAS_CORETYPE;\nenv = as the environment says; or a core "
       "name such as SkylakeX (auto)",
       text(o.blas_core)},
      {"--first-bucket-mb", "X", execution, "size of DDP's first gradient bucket (1)", number(o.first_bucket_mb, 1e-6, 1 << 16)},
      {"--bucket-mb", "X", execution, "size of DDP's other gradient buckets (25)", number(o.bucket_mb, 1e-6, 1 << 16)},
      {"--compression", "none|fp16|bf16", execution, "gradient compression hook (none)",
       [&o](const std::string& f, const std::string& v) { o.compression = one_of(f, v, {"none", "fp16", "bf16"}); }},
      {"--zero", "0|1", execution,
       "0: every rank holds all of AdamW's state (DDP); 1: ZeRO-1, each rank\nholds and updates a 1/ranks shard, "
       "weights all-gathered (0)",
       integer(o.zero, 0, 1)},
      {"--grow-wait", "S", execution,
       "--elastic: after losing a rank, wait up to S seconds at the next step\nboundary for a replacement "
       "(kolorun --replace) to join (0: only check)",
       number(o.grow_wait, 0, 86400)},
      {"--die-at-step", "N", testing, "rank --die-rank kills itself with SIGKILL as step N begins (0 = never)",
       integer(o.die_at_step, 0, kBig)},
      {"--die-rank", "R", testing, "the rank --die-at-step kills (1)", integer(o.die_rank, 0, 1 << 20)},
      {"--die-after-us", "U", testing, "--die-at-step kills U microseconds into the step, mid-step (0)",
       integer(o.die_after_us, 0, kBig)},
  };
}

// The command line as CLI11 sees it: every flag as text (`values`, in value_flags' order), for
// value_flags' setters to check; --resume, --help and --version as flags.
struct Cli {
  CLI::App app{"", "kolo-train"};
  std::vector<std::string> values;
  std::vector<CLI::Option*> given;
  bool version = false;
};

void define(Cli& cmd, TrainOptions& o, const std::vector<Flag>& flags) {
  cli::configure(cmd.app, "Usage: kolorun -n K kolo-train [options]      (or plain kolo-train for one rank)\n");
  cmd.app.description(
      "Trains a small GPT-style byte-level transformer with data parallelism over kolo\n"
      "(kolo::DistributedDataParallel): every rank holds the whole model and a disjoint\n"
      "shard of each global batch; gradients are averaged in buckets that overlap backward.");
  cmd.values.resize(flags.size());
  for (size_t i = 0; i < flags.size(); ++i)
    cmd.given.push_back(cmd.app.add_option(flags[i].name, cmd.values[i], flags[i].help)
                            ->type_name(flags[i].value_name)
                            ->group(flags[i].group));
  cmd.app.add_flag("--resume", o.resume, "continue from the newest checkpoint in DIR (all ranks load it)")
      ->group("Evaluation and output (rank 0 prints and writes)");
  cmd.app.add_flag("--elastic", o.elastic,
                   "when a rank dies, the others shrink the group, roll back to the\n"
                   "last step they all completed and go on with the same global batch\n"
                   "(--zero 1: reload the newest checkpoint); run under kolorun --elastic;\n"
                   "at every step boundary of a shrunk group, a replacement waiting to\n"
                   "join (kolorun --replace) is let in and the group grows back")
      ->group("Execution");
  cli::add_help(cmd.app, o.help, "this text")->group("Execution");
  cmd.app.add_flag("--version", cmd.version, "print the version and exit")->group("Execution");
  cmd.app.footer("Example: kolorun -n 2 build/examples/train/kolo-train --steps 300");
}

}  // namespace

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  const std::vector<Flag> flags = value_flags(o);
  Cli cmd;
  define(cmd, o, flags);
  try {
    cli::parse(cmd.app, args);
  } catch (const CLI::Error& e) {
    // A flag that takes a value, last on the line: CLI11 says "1 required ... missing".
    if (!args.empty() && args.back().rfind("--", 0) == 0) {
      const CLI::Option* last = cmd.app.get_option_no_throw(args.back());
      if (last != nullptr && last->get_type_size_max() > 0) throw InvalidArgument(args.back() + " needs a value");
    }
    // Anything CLI11 did not know (an unknown flag, a stray word) it left in remaining().
    const std::vector<std::string> unknown = cmd.app.remaining();
    if (!unknown.empty()) throw InvalidArgument("unknown option '" + unknown.front() + "' (see --help)");
    throw InvalidArgument(std::string(e.what()) + " (see --help)");
  }
  if (cmd.version) {
    std::printf("kolo-train (kolo) %s\n", KOLO_VERSION);
    std::exit(0);
  }
  for (size_t i = 0; i < flags.size(); ++i)
    if (cmd.given[i]->count() > 0) flags[i].set(flags[i].name, cmd.values[i]);
  if (o.dim % o.heads != 0)
    throw InvalidArgument("--dim (" + std::to_string(o.dim) + ") must be a multiple of --heads (" +
                          std::to_string(o.heads) + ")");
  if (o.min_lr > o.lr) throw InvalidArgument("--min-lr must not exceed --lr");
  if (o.elastic && o.device != "cpu")
    throw InvalidArgument("--elastic keeps its rollback state on the host: use --device cpu");
  return o;
}

std::string train_usage() {
  TrainOptions o;
  const std::vector<Flag> flags = value_flags(o);
  Cli cmd;
  define(cmd, o, flags);
  return cli::help(cmd.app);
}

}  // namespace kolo::train
