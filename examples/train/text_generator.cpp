#include "text_generator.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kolo::train {
namespace {

int pick_token(const float* logits, int vocab, double temperature, Rng& rng) {
  if (temperature <= 0) return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  const float top = *std::max_element(logits, logits + vocab);
  std::vector<double> weights(static_cast<size_t>(vocab));
  double total = 0;
  for (int v = 0; v < vocab; ++v) total += weights[size_t(v)] = std::exp((logits[v] - top) / temperature);
  double draw = rng.uniform() * total;
  for (int v = 0; v < vocab; ++v)
    if ((draw -= weights[size_t(v)]) < 0) return v;
  return vocab - 1;
}

}  // namespace

std::string generate_text(gpt::Model<float>& model, const std::string& prompt, int chars, double temperature, Rng& rng) {
  const int vocab = model.config().vocab, seq = model.config().seq;
  std::vector<int> context;
  for (unsigned char c : prompt.empty() ? std::string("\n") : prompt) context.push_back(c % vocab);
  std::string text;
  for (int i = 0; i < chars; ++i) {
    const int length = std::min<int>(static_cast<int>(context.size()), seq);
    const int* window = context.data() + context.size() - size_t(length);
    model.forward(window, nullptr, 1, length);
    const int next = pick_token(model.logits() + size_t(length - 1) * size_t(vocab), vocab, temperature, rng);
    context.push_back(next);
    text.push_back(static_cast<char>(next));
  }
  return text;
}

}  // namespace kolo::train
