// Checkpoints: exact round trip, newest-first lookup, pruning, and refusal of files that do not
// fit the run (another model, truncated, not a checkpoint).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint.hpp"
#include "kolo/error.hpp"

namespace kolo::train {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kolo-ckpt-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static TrainState sample_state(uint64_t step) {
    TrainState s;
    s.shape = {256, 16, 2, 2, 8, 5, 0xabcdef};
    s.step = step;
    s.global_batch = 12;
    s.seed = 77;
    s.sampler = {3, 48};
    s.rng = {1, 2, 3, 0xffffffffffffffffull};
    s.adam_steps = step;
    s.params = {1.5f, -2.25f, 3e-8f, 0.0f, -0.0f};
    s.adam_m = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    s.adam_v = {1e-9f, 2e-9f, 3e-9f, 4e-9f, 5e-9f};
    for (uint64_t i = 1; i <= step; ++i) s.train_losses.push_back({i, 5.0 / double(i)});
    s.validation_losses.push_back({step, 1.25});
    return s;
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, RoundTripsEveryFieldExactly) {
  const TrainState saved = sample_state(7);
  const std::string path = save_checkpoint(dir_.string(), saved);
  EXPECT_EQ(fs::path(path).filename(), "step-00000007.ckpt");
  const TrainState loaded = load_checkpoint(path, saved.shape);
  EXPECT_EQ(loaded.shape, saved.shape);
  EXPECT_EQ(loaded.step, 7u);
  EXPECT_EQ(loaded.global_batch, 12u);
  EXPECT_EQ(loaded.seed, 77u);
  EXPECT_EQ(loaded.sampler.epoch, 3u);
  EXPECT_EQ(loaded.sampler.next, 48u);
  EXPECT_EQ(loaded.rng, saved.rng);
  EXPECT_EQ(loaded.adam_steps, 7u);
  EXPECT_EQ(0, std::memcmp(loaded.params.data(), saved.params.data(), 5 * sizeof(float)));  // -0.0 too
  EXPECT_EQ(loaded.adam_m, saved.adam_m);
  EXPECT_EQ(loaded.adam_v, saved.adam_v);
  ASSERT_EQ(loaded.train_losses.size(), 7u);
  EXPECT_EQ(loaded.train_losses[2].step, 3u);
  EXPECT_EQ(loaded.train_losses[2].loss, 5.0 / 3.0);
  ASSERT_EQ(loaded.validation_losses.size(), 1u);
  EXPECT_EQ(loaded.validation_losses[0].loss, 1.25);
}

// What kolo-train --elastic broadcasts to a joiner: the file's bytes, checked the same way.
TEST_F(CheckpointTest, InMemoryStateIsTheFileContentAndIsChecked) {
  const TrainState saved = sample_state(7);
  const std::string bytes = encode_train_state(saved);
  std::ifstream file(save_checkpoint(dir_.string(), saved), std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, on_disk);
  const TrainState got = decode_train_state(bytes, "rank 0's state", saved.shape);
  EXPECT_EQ(got.step, 7u);
  EXPECT_EQ(got.rng, saved.rng);
  EXPECT_EQ(got.adam_v, saved.adam_v);
  EXPECT_EQ(got.train_losses.size(), 7u);
  CheckpointShape other = saved.shape;
  other.layers += 1;
  EXPECT_THROW(decode_train_state(bytes, "rank 0's state", other), InvalidArgument);
  EXPECT_THROW(decode_train_state(bytes.substr(0, bytes.size() - 3), "rank 0's state", saved.shape), Error);
}

TEST_F(CheckpointTest, LatestIsTheHighestStepAndOnlyTheNewestAreKept) {
  EXPECT_FALSE(latest_checkpoint(dir_.string()).has_value());
  for (uint64_t step : {5, 10, 15}) save_checkpoint(dir_.string(), sample_state(step));
  auto latest = latest_checkpoint(dir_.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(fs::path(*latest).filename(), "step-00000015.ckpt");
  EXPECT_FALSE(fs::exists(dir_ / "step-00000005.ckpt"));
  EXPECT_TRUE(fs::exists(dir_ / "step-00000010.ckpt"));
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, size_t(kKeptCheckpoints));  // no .tmp left behind
}

TEST_F(CheckpointTest, RefusesAnotherModelShape) {
  const TrainState saved = sample_state(3);
  const std::string path = save_checkpoint(dir_.string(), saved);
  CheckpointShape other = saved.shape;
  other.layers = 3;
  try {
    load_checkpoint(path, other);
    FAIL() << "a checkpoint of another model was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--layers 2, this run has 3"), std::string::npos) << e.what();
  }
  other = saved.shape;
  other.corpus_fingerprint ^= 1;
  EXPECT_THROW(load_checkpoint(path, other), InvalidArgument);
}

TEST_F(CheckpointTest, RefusesTruncatedAndForeignFiles) {
  const TrainState saved = sample_state(4);
  const std::string path = save_checkpoint(dir_.string(), saved);
  fs::resize_file(path, fs::file_size(path) - 3);
  EXPECT_THROW(load_checkpoint(path, saved.shape), Error);
  std::ofstream(dir_ / "junk.ckpt") << "hello, not a checkpoint at all";
  EXPECT_THROW(load_checkpoint((dir_ / "junk.ckpt").string(), saved.shape), Error);
  EXPECT_THROW(load_checkpoint((dir_ / "missing.ckpt").string(), saved.shape), Error);
}

}  // namespace
}  // namespace kolo::train
