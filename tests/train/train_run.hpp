// Shared by the kolo-train process tests (trainer_process_test.cpp, zero_process_test.cpp): the
// real binary under kolorun on a tiny model and a generated corpus, its printed losses and
// gradient norms, its final parameters, and the comparison of two runs.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kolorun_process.hpp"

namespace kolo::train {

namespace fs = std::filesystem;
using launcher::testing::ChildProcess;
using launcher::testing::ProcessResult;

std::string trainer_path();
// Work files of this test process, removed at exit.
const fs::path& work_dir();
// About 60 KB of word salad from a fixed generator: enough windows for every run.
const std::string& corpus_path();
// The tiny configuration every run shares; `extra` adds or overrides flags.
std::vector<std::string> tiny_run(const std::vector<std::string>& extra);
ProcessResult kolorun(int ranks, const std::vector<std::string>& program,
                      const std::vector<std::pair<std::string, std::string>>& env = {});
// A field of rank 0's "step <n> loss <value> lr <value> norm <value> ..." lines: step -> the
// value as printed.
std::map<int, std::string> step_field(const std::string& out, const std::string& field);
std::map<int, std::string> step_losses(const std::string& out);
std::vector<float> read_floats(const fs::path& path);

struct TrainRun {
  ProcessResult result;
  std::map<int, std::string> losses;
  std::map<int, std::string> grad_norms;  // before clipping: shows the gradients' scale, which AdamW hides
  std::vector<float> params;
};

// A kolo-train run on `ranks` ranks named `name` (its checkpoint directory is work_dir()/name-ckpt).
TrainRun train(int ranks, const std::string& name, const std::vector<std::string>& flags);

#define ASSERT_RUN_OK(run)                                                                             \
  ASSERT_TRUE((run).result.exited() && (run).result.exit_code() == 0)                                  \
      << "status " << (run).result.wait_status << "\nstdout:\n" << (run).result.out << "\nstderr:\n" \
      << (run).result.err

// Losses within 1e-5 relative step by step, gradient norms within 1e-4, parameters within
// param_tolerance (relative, absolute below 1).
void expect_same_training(const TrainRun& a, const TrainRun& b, int steps, double param_tolerance = 1e-5);
// Training actually happened: the loss went down, so equal runs are not trivially equal.
void expect_learning(const TrainRun& run, int steps);

}  // namespace kolo::train
