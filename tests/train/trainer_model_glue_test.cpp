// The trainer's pieces that touch the model: which parameters AdamW decays (checked against the
// real layout, so a renamed tensor cannot silently lose or gain decay) and text generation.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model.hpp"
#include "rng.hpp"
#include "text_generator.hpp"
#include "weight_decay_policy.hpp"

namespace kolo::train {
namespace {

// GPT-2 decays the 2-D tensors: both embeddings and the four matrices of every block.
TEST(WeightDecayPolicy, DecaysExactlyTheMatricesAndEmbeddings) {
  const gpt::Config c{256, 16, 3, 2, 8};
  gpt::Model<float> model(c);
  size_t decayed = 0, kept = 0;
  for (const DecayRange& r : decay_ranges(model.layout())) (r.decay ? decayed : kept) += r.count;
  const size_t C = size_t(c.dim);
  const size_t matrices = size_t(c.vocab) * C + size_t(c.seq) * C + size_t(c.layers) * (3 * C * C + C * C + 4 * C * C + 4 * C * C);
  EXPECT_EQ(decayed, matrices);
  EXPECT_EQ(decayed + kept, model.num_params());
  EXPECT_FALSE(is_decayed("h.0.ln1.weight"));
  EXPECT_FALSE(is_decayed("lnf.weight"));
  EXPECT_FALSE(is_decayed("h.2.mlp.fc.bias"));
  EXPECT_TRUE(is_decayed("h.2.mlp.fc.weight"));
}

TEST(TextGenerator, GreedyPicksTheArgmaxAndSamplingFollowsTheSeed) {
  gpt::Model<float> model(gpt::Config{256, 8, 1, 2, 8});
  model.init(3);
  Rng unused(1);
  const std::string prompt = "In the beginning";  // longer than seq: only the last 8 bytes count
  const std::string greedy = generate_text(model, prompt, 5, 0.0, unused);
  ASSERT_EQ(greedy.size(), 5u);
  // The first greedy byte, computed here directly from the model's logits.
  std::vector<int> tail;
  for (size_t i = prompt.size() - 8; i < prompt.size(); ++i) tail.push_back(static_cast<unsigned char>(prompt[i]));
  model.forward(tail.data(), nullptr, 1, 8);
  const float* last = model.logits() + 7 * 256;
  EXPECT_EQ(static_cast<unsigned char>(greedy[0]), std::max_element(last, last + 256) - last);

  Rng a(42), b(42), c(43);
  const std::string sa = generate_text(model, prompt, 40, 1.0, a);
  EXPECT_EQ(sa, generate_text(model, prompt, 40, 1.0, b));
  EXPECT_NE(sa, generate_text(model, prompt, 40, 1.0, c));
  EXPECT_NE(a.state(), Rng(42).state());  // the draws came from the generator
}

}  // namespace
}  // namespace kolo::train
