#include "train_options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

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

}  // namespace

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  constexpr long long kBig = 1'000'000'000;
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  auto integer = [](int& field, long long low, long long high) -> Setter {
    return [&field, low, high](const std::string& f, const std::string& v) { field = int(parse_integer(f, v, low, high)); };
  };
  auto number = [](double& field, double low, double high) -> Setter {
    return [&field, low, high](const std::string& f, const std::string& v) { field = parse_number(f, v, low, high); };
  };
  auto text = [](std::string& field) -> Setter { return [&field](const std::string&, const std::string& v) { field = v; }; };
  const std::map<std::string, Setter> with_value{
      {"--batch", integer(o.batch, 1, 1 << 20)},
      {"--seq", integer(o.seq, 1, 1 << 16)},
      {"--layers", integer(o.layers, 1, 1024)},
      {"--heads", integer(o.heads, 1, 1024)},
      {"--dim", integer(o.dim, 1, 1 << 16)},
      {"--steps", integer(o.steps, 1, kBig)},
      {"--lr", number(o.lr, 0, 10)},
      {"--min-lr", number(o.min_lr, 0, 10)},
      {"--warmup", integer(o.warmup, 0, kBig)},
      {"--weight-decay", number(o.weight_decay, 0, 10)},
      {"--beta1", number(o.beta1, 0, 0.999999)},
      {"--beta2", number(o.beta2, 0, 0.999999)},
      {"--clip", number(o.clip, 0, 1e9)},
      {"--seed", [&o](const std::string& f, const std::string& v) { o.seed = uint64_t(parse_integer(f, v, 0, INT64_MAX)); }},
      {"--accum", integer(o.accum, 1, 1 << 16)},
      {"--data", text(o.data)},
      {"--val-fraction", number(o.val_fraction, 1e-6, 0.5)},
      {"--eval-every", integer(o.eval_every, 0, kBig)},
      {"--eval-samples", integer(o.eval_samples, 1, 1 << 24)},
      {"--ckpt", text(o.ckpt)},
      {"--ckpt-every", integer(o.ckpt_every, 0, kBig)},
      {"--plot", text(o.plot)},
      {"--sample-chars", integer(o.sample_chars, 0, 1 << 20)},
      {"--prompt", text(o.prompt)},
      {"--temperature", number(o.temperature, 0, 100)},
      {"--dump-params", text(o.dump_params)},
      {"--device", [&o](const std::string& f, const std::string& v) { o.device = one_of(f, v, {"cpu", "cuda"}); }},
      {"--threads", integer(o.threads, 0, 1024)},
      {"--blas-core", text(o.blas_core)},
      {"--bucket-mb", number(o.bucket_mb, 1e-6, 1 << 16)},
      {"--first-bucket-mb", number(o.first_bucket_mb, 1e-6, 1 << 16)},
      {"--compression",
       [&o](const std::string& f, const std::string& v) { o.compression = one_of(f, v, {"none", "fp16", "bf16"}); }},
      {"--die-at-step", integer(o.die_at_step, 0, kBig)},
      {"--die-rank", integer(o.die_rank, 0, 1 << 20)},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      continue;
    }
    if (flag == "--version") {
      std::printf("kolo-train (kolo) %s\n", KOLO_VERSION);
      std::exit(0);
    }
    if (flag == "--resume") {
      o.resume = true;
      continue;
    }
    std::string value;
    bool attached = false;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      attached = true;
    }
    auto setter = with_value.find(flag);
    if (setter == with_value.end()) throw InvalidArgument("unknown option '" + flag + "' (see --help)");
    if (!attached) {
      if (i + 1 >= args.size()) throw InvalidArgument(flag + " needs a value");
      value = args[++i];
    }
    setter->second(flag, value);
  }
  if (o.dim % o.heads != 0)
    throw InvalidArgument("--dim (" + std::to_string(o.dim) + ") must be a multiple of --heads (" +
                          std::to_string(o.heads) + ")");
  if (o.min_lr > o.lr) throw InvalidArgument("--min-lr must not exceed --lr");
  return o;
}

std::string train_usage() {
  return R"(Usage: kolorun -n K kolo-train [options]      (or plain kolo-train for one rank)
Trains a small GPT-style byte-level transformer with data parallelism over kolo
(kolo::DistributedDataParallel): every rank holds the whole model and a disjoint
shard of each global batch; gradients are averaged in buckets that overlap backward.

Model:
  --seq T            context length in bytes (64)
  --layers L         transformer blocks (2)
  --heads H          attention heads, must divide --dim (4)
  --dim D            embedding width (64)
Data:
  --data PATH        a text file, or "kjv": the King James Bible from Debian's
                     bible-kjv package, read through `bible` (default kjv)
  --val-fraction F   the last F of the text is the validation set (0.05)
  --batch b          sequences per rank per micro-step (16)
  --accum A          micro-steps per optimizer step, gradients summed locally (1);
                     global batch = ranks * b * A
Optimisation (AdamW, warmup + cosine schedule):
  --steps S          optimizer steps (200)
  --lr X             peak learning rate (1e-3)
  --min-lr X         final learning rate (lr/10)
  --warmup N         linear warmup steps (steps/10, at most 100)
  --weight-decay X   decoupled weight decay on weight matrices and embeddings (0.1)
  --beta1 X, --beta2 X  Adam moment decays (0.9, 0.95)
  --clip X           clip the global gradient norm to X, 0 = off (1.0)
  --seed N           seeds the initial weights, the data order and sampling (1337)
Evaluation and output (rank 0 prints and writes):
  --eval-every N     validation loss every N steps, 0 = only at the end (50)
  --eval-samples N   validation windows per evaluation (64)
  --ckpt DIR         checkpoint directory (kolo-train-ckpt)
  --ckpt-every N     checkpoint every N steps besides the end, 0 = end only (100)
  --resume           continue from the newest checkpoint in DIR (all ranks load it)
  --plot PATH        loss-curve PNG via gnuplot (DIR/loss.png; "none" = no plot)
  --sample-chars N   characters of text generated at the end, 0 = none (200)
  --prompt TEXT      start of the generated text ("And God said")
  --temperature X    sampling temperature, 0 = greedy (0.8)
  --dump-params FILE write the final flat float32 parameters to FILE
Execution:
  --device cpu|cuda  where the model runs (cpu; cuda is not available yet)
  --threads N        BLAS threads per rank (0 = cores / ranks on this host)
  --blas-core C      OpenBLAS kernels: auto = detect the CPU, ignoring OPENBLAS_CORETYPE;
                     env = as the environment says; or a core name such as SkylakeX (auto)
  --first-bucket-mb X, --bucket-mb X   DDP bucket sizes (1, 25)
  --compression none|fp16|bf16          gradient compression hook (none)
  -h, --help         this text
Testing:
  --die-at-step N, --die-rank R   rank R kills itself with SIGKILL as step N begins

Example: kolorun -n 2 build/examples/train/kolo-train --steps 300
)";
}

}  // namespace kolo::train
