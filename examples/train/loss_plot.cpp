#include "loss_plot.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kolo::train {
namespace {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

// gnuplot reads file names inside single quotes; refuse names that would break out of them.
bool quotable(const std::string& path) { return path.find('\'') == std::string::npos && path.find('\n') == std::string::npos; }

}  // namespace

std::string write_loss_plot(const std::string& png_path, const std::vector<LossPoint>& train,
                            const std::vector<LossPoint>& validation) {
  namespace fs = std::filesystem;
  if (train.empty()) return "loss plot skipped: no steps recorded";
  if (!quotable(png_path)) return "loss plot skipped: the path " + png_path + " contains a quote";
  std::error_code ec;
  if (fs::path(png_path).has_parent_path()) fs::create_directories(fs::path(png_path).parent_path(), ec);
  const std::string data_path = fs::path(png_path).replace_extension(".tsv").string();
  {
    std::ofstream data(data_path);
    data << "# step\ttrain_loss\n";
    for (const LossPoint& p : train) data << p.step << '\t' << p.loss << '\n';
    data << "\n\n# step\tvalidation_loss\n";  // two blank lines: gnuplot's next data block (index 1)
    for (const LossPoint& p : validation) data << p.step << '\t' << p.loss << '\n';
    if (!data) return "loss plot skipped: cannot write " + data_path;
  }
  if (!gnuplot_available())
    return "loss plot skipped: gnuplot is not installed (apt-get install gnuplot-nox); data in " + data_path;
  FILE* gp = ::popen("gnuplot 2>&1", "w");
  if (gp == nullptr) return "loss plot skipped: cannot start gnuplot; data in " + data_path;
  std::fprintf(gp,
               "set terminal png size 900,500\n"
               "set output '%s'\n"
               "set xlabel 'step'\nset ylabel 'loss (nats per byte)'\nset grid\nset key top right\n"
               "plot '%s' index 0 using 1:2 with lines title 'train'%s\n",
               png_path.c_str(), data_path.c_str(),
               validation.empty() ? "" : (", '" + data_path + "' index 1 using 1:2 with linespoints title 'validation'").c_str());
  if (::pclose(gp) != 0) return "loss plot failed: gnuplot reported an error; data in " + data_path;
  return "loss curve written to " + png_path;
}

}  // namespace kolo::train
