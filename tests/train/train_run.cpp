// The kolo-train process tests' helpers (train_run.hpp).
#include "train_run.hpp"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <regex>

namespace kolo::train {

namespace {
struct WorkDirCleanup : ::testing::Environment {
  void TearDown() override { fs::remove_all(work_dir()); }
};
const auto* const cleanup = ::testing::AddGlobalTestEnvironment(new WorkDirCleanup);
}  // namespace

std::string trainer_path() { return launcher::testing::probe_path("KOLO_TRAIN"); }

const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("kolo-train-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

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
                      const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> argv{launcher::testing::kolorun_path(), "-n", std::to_string(ranks)};
  argv.insert(argv.end(), program.begin(), program.end());
  // Every wait is bounded: collectives by KOLO_TIMEOUT, the whole job by the wait below.
  std::vector<std::pair<std::string, std::string>> all_env{{"KOLO_TIMEOUT", "20"}};
  all_env.insert(all_env.end(), env.begin(), env.end());
  return ChildProcess(argv, all_env).wait(120);
}

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


// Losses within 1e-5 relative step by step, gradient norms within 1e-4 (printed with 6 digits),
// parameters within 1e-5: the runs differ only in the order of floating-point sums (per-rank
// means averaged vs one mean). The norms matter because AdamW's update is blind to the scale of
// the gradients: a wrong averaging factor would leave losses and weights unchanged.
void expect_same_training(const TrainRun& a, const TrainRun& b, int steps, double param_tolerance) {
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
    if (diff > param_tolerance * std::max(1.0, std::fabs(double(b.params[i])))) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "parameters differ by up to " << worst;
}

void expect_learning(const TrainRun& run, int steps) {
  ASSERT_EQ(run.losses.size(), size_t(steps));
  EXPECT_LT(std::stod(run.losses.at(steps)), std::stod(run.losses.at(1)) - 0.3);
}

}  // namespace kolo::train
