// Two AdamW training steps of a small model against PyTorch (tests/train/torch_reference.py):
// the same parameters and batch go to torch through a binary file, torch computes the losses,
// the first step's gradients and the parameters after both steps with its own ops and
// torch.optim.AdamW (in float64), and this test compares them with the float32 C++ model
// driven by the trainer's AdamW. Skips when no python3 with torch is found.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "adamw.hpp"
#include "model/model.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::gpt {
namespace {

namespace fs = std::filesystem;

// Runs torch_reference.py with the first interpreter that has torch: $KOLO_PYTHON if set, else
// python3 on PATH, else the system one (a pyenv shim on PATH may lack Debian's python3-torch).
// Returns the interpreter used, or "" when none has torch (the script exits 77 without it, the
// shell 127 without the interpreter). Throws if the script itself fails.
std::string run_torch_reference(const std::string& in, const std::string& out) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KOLO_PYTHON")) {
    candidates.emplace_back(env);
  } else {
    candidates.emplace_back("python3");
    candidates.emplace_back("/usr/bin/python3");
  }
  for (const std::string& py : candidates) {
    const std::string cmd = "'" + py + "' '" KOLO_TORCH_REFERENCE "' '" + in + "' '" + out + "' 2>&1";
    const int status = std::system(cmd.c_str());
    if (status == -1 || !WIFEXITED(status)) throw std::runtime_error("could not run: " + cmd);
    const int rc = WEXITSTATUS(status);
    if (rc == 0) return py;
    if (rc != 77 && rc != 127) throw std::runtime_error("failed with status " + std::to_string(rc) + ": " + cmd);
  }
  return "";
}

template <class V>
void put(std::ofstream& f, V v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

// Decoupled weight decay for the matrices and embeddings, none for biases and LayerNorm gains
// (the usual GPT-2 recipe). Torch gets this mask; the C++ side uses the trainer's policy, and the
// test checks that the two agree.
bool decayed(const std::string& name) {
  return name == "wte" || name == "wpe" || name.ends_with("qkv.weight") || name.ends_with("proj.weight") ||
         name.ends_with("fc.weight");
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kolo-gpt-torch-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// max |a - b| over a range, relative to max |b|.
double relative_error(const float* a, const float* b, size_t n) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    ref = std::max(ref, std::abs(double(b[i])));
  }
  return ref > 0 ? diff / ref : diff;
}

TEST(GptTorchReference, TwoAdamWStepsMatchPyTorch) {
  const Config c{/*vocab=*/256, /*seq=*/32, /*layers=*/2, /*heads=*/4, /*dim=*/32};
  const int B = 4, T = 32, steps = 2;
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  Model<float> model(c);
  model.init(2024);
  {  // GPT-2 init zeroes biases and sets gains to 1: perturb so every mapping is visible to torch.
    std::mt19937 gen(1);
    std::normal_distribution<float> noise(0.0f, 0.02f);
    for (size_t i = 0; i < model.num_params(); ++i) model.params()[i] += noise(gen);
  }
  std::vector<int> tokens(B * T), targets(B * T);
  {
    std::mt19937 gen(2);
    std::uniform_int_distribution<int> tok(0, c.vocab - 1);
    for (int i = 0; i < B * T; ++i) tokens[i] = tok(gen);
    for (int i = 0; i < B * T; ++i) targets[i] = i % T == T - 1 ? tok(gen) : tokens[i + 1];  // next token
  }

  TempDir dir;
  const fs::path in = dir.path / "in.bin", out = dir.path / "out.bin";
  {
    std::ofstream f(in, std::ios::binary);
    f.write("KGPT", 4);
    for (int v : {c.vocab, c.seq, c.layers, c.heads, c.dim, B, T, steps, int(model.layout().size())}) put(f, v);
    for (double v : {lr, beta1, beta2, eps, wd}) put(f, v);
    for (const ParamInfo& p : model.layout()) {
      put(f, int64_t(p.count));
      put(f, int32_t(decayed(p.name)));
    }
    f.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int));
    f.write(reinterpret_cast<const char*>(targets.data()), targets.size() * sizeof(int));
    f.write(reinterpret_cast<const char*>(model.params()), model.num_params() * sizeof(float));
    ASSERT_TRUE(f.good());
  }
  if (run_torch_reference(in.string(), out.string()).empty())
    GTEST_SKIP() << "no python3 with torch found (Debian: apt-get install python3-torch; or set KOLO_PYTHON)";

  const size_t P = model.num_params();
  std::vector<double> torch_losses(steps);
  std::vector<float> torch_grads(P), torch_params(P);
  {
    std::ifstream f(out, std::ios::binary);
    f.read(reinterpret_cast<char*>(torch_losses.data()), steps * sizeof(double));
    f.read(reinterpret_cast<char*>(torch_grads.data()), P * sizeof(float));
    f.read(reinterpret_cast<char*>(torch_params.data()), P * sizeof(float));
    ASSERT_TRUE(f.good()) << "short output from torch_reference.py";
  }

  // The same steps here, with the trainer's AdamW.
  for (const ParamInfo& p : model.layout()) EXPECT_EQ(train::is_decayed(p.name), decayed(p.name)) << p.name;
  train::AdamW adamw(P, train::decay_ranges(model.layout()),
                     train::AdamWConfig{float(beta1), float(beta2), float(eps), float(wd)});
  for (int s = 0; s < steps; ++s) {
    model.zero_grad();
    const float loss = model.forward(tokens.data(), targets.data(), B, T);
    model.backward(1.0f, nullptr);
    EXPECT_NEAR(loss, torch_losses[s], 1e-5 * torch_losses[s]) << "step " << s;
    if (s == 0) {
      double worst = 0;
      for (const ParamInfo& p : model.layout()) {
        const double err = relative_error(model.grads() + p.offset, torch_grads.data() + p.offset, p.count);
        EXPECT_LT(err, 1e-4) << "gradient of " << p.name;
        worst = std::max(worst, err);
      }
      std::printf("step 1: loss %.7f (torch %.7f), worst per-tensor relative gradient error %.2e\n", loss,
                  torch_losses[s], worst);
    } else {
      std::printf("step %d: loss %.7f (torch %.7f)\n", s + 1, loss, torch_losses[s]);
    }
    adamw.step(model.params(), model.grads(), float(lr));
  }
  // AdamW moves every weight by about lr per step; a wrong update (missing bias correction,
  // decay of the LayerNorm gains) differs by a sizable fraction of that. The tolerance is not
  // tighter because for gradients near eps (1e-8) the update g / (|g| + eps) amplifies float32
  // rounding of g (observed: 4e-6 = 0.004 lr).
  double worst = 0;
  for (const ParamInfo& p : model.layout()) {
    double diff = 0;
    for (size_t i = p.offset; i < p.offset + p.count; ++i)
      diff = std::max(diff, std::abs(double(model.params()[i]) - double(torch_params[i])));
    EXPECT_LT(diff, 5e-2 * lr) << "parameters of " << p.name << " after " << steps << " steps";
    worst = std::max(worst, diff);
  }
  std::printf("after %d AdamW steps: largest parameter difference %.2e (lr %.0e)\n", steps, worst, lr);
}

}  // namespace
}  // namespace kolo::gpt
