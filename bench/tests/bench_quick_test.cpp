// CI's check of the benchmark pipeline: runs `scripts/bench/bench-all.sh --quick` (kolo-perf for
// every collective over tcp and shm, the Open MPI and Gloo peers, compare.sh with the physical
// limits and charts, the micro-benchmarks) and then re-reads what it wrote, independently of
// the script's own verification: the script must exit 0, every CSV row of every table must
// show 0 wrong elements (or be an unchecked column), and the comparison CSV and the charts must
// exist. Speed is never asserted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

// Rows of a CSV with a header, as column-name -> value maps.
std::vector<std::vector<std::pair<std::string, std::string>>> read_csv(const fs::path& path) {
  std::ifstream f(path);
  std::string line;
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  if (!std::getline(f, line)) return rows;
  const std::vector<std::string> header = split_csv_line(line);
  while (std::getline(f, line)) {
    const std::vector<std::string> values = split_csv_line(line);
    std::vector<std::pair<std::string, std::string>> row;
    for (size_t i = 0; i < header.size() && i < values.size(); ++i) row.emplace_back(header[i], values[i]);
    rows.push_back(row);
  }
  return rows;
}

std::string field(const std::vector<std::pair<std::string, std::string>>& row, const std::string& name) {
  for (const auto& [k, v] : row) {
    if (k == name) return v;
  }
  return "<missing>";
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(BenchQuick, PipelineRunsAndEveryRowChecksClean) {
  const std::string source = env_or_fail("KOLO_SOURCE_ROOT");
  const std::string build = env_or_fail("KOLO_BUILD_ROOT");
  ASSERT_FALSE(source.empty() || build.empty()) << "run through meson test (KOLO_SOURCE_ROOT/KOLO_BUILD_ROOT unset)";
  const fs::path out = fs::path(build) / "bench-quick";
  const std::string command = "bash '" + source + "/scripts/bench/bench-all.sh' --quick --build '" + build + "' --out '" +
                              out.string() + "'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 0) << command << " failed; its logs are in " << out;

  // Every kolo-perf and peer table: a CSV with rows, every checked row 0 wrong.
  int tables = 0, kolo_tables = 0, checked_rows = 0;
  for (const char* dir : {"perf", "peers"}) {
    if (!fs::is_directory(out / dir)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(out / dir)) {
      if (e.path().extension() != ".txt") continue;
      // A peer run that bench-all.sh retried keeps its failed first log: not a table.
      if (e.path().filename().string().find(".first-try.") != std::string::npos) continue;
      ++tables;
      if (std::string(dir) == "perf") ++kolo_tables;
      fs::path csv = e.path();
      csv.replace_extension(".csv");
      const auto rows = read_csv(csv);
      EXPECT_FALSE(rows.empty()) << csv << " has no rows";
      for (const auto& row : rows) {
        const std::string wrong = field(row, "wrong");
        EXPECT_TRUE(wrong == "0" || wrong.empty()) << csv << ": " << field(row, "collective") << " size "
                                                   << field(row, "size_bytes") << " wrong=" << wrong;
        if (wrong == "0") ++checked_rows;
      }
    }
  }
  // 9 collectives x 2 transports at 2 ranks.
  EXPECT_EQ(kolo_tables, 18) << "kolo-perf tables in " << out / "perf";
  EXPECT_GT(checked_rows, 100);
  EXPECT_GE(tables, kolo_tables);

  // The interleaved comparison: kolo rows, no wrong results, limits, and charts with gnuplot.
  const auto compare = read_csv(out / "compare-tcp" / "compare.csv");
  int kolo_rows = 0;
  for (const auto& row : compare) {
    if (field(row, "impl") == "kolo") ++kolo_rows;
    EXPECT_EQ(field(row, "wrong"), "0") << field(row, "impl") << " size " << field(row, "size_bytes");
  }
  EXPECT_GT(kolo_rows, 0) << out / "compare-tcp" / "compare.csv";
  EXPECT_TRUE(fs::is_regular_file(out / "compare-tcp" / "compare.json"));
  EXPECT_TRUE(fs::is_regular_file(out / "compare-tcp" / "limits.json"));
  if (have_program("gnuplot")) {
    int pngs = 0;
    if (fs::is_directory(out / "compare-tcp" / "plots"))
      for (const fs::directory_entry& e : fs::directory_iterator(out / "compare-tcp" / "plots"))
        if (e.path().extension() == ".png" && fs::file_size(e.path()) > 0) ++pngs;
    EXPECT_GT(pngs, 0) << "gnuplot is installed but no chart in " << out / "compare-tcp" / "plots";
  }

  // The micro-benchmarks, when Google Benchmark was there to build them: each entry of the JSON
  // has its counter, positive. kolo-bench-overhead: 3 collectives x (1 rank + 2 ranks over tcp
  // and shm). kolo-bench-transport, both transports in one process: ping-pong at 8 B-16 MiB
  // (x8, 8 sizes) and streaming at 4 KiB-16 MiB (x4, 7 sizes) each.
  const auto count_positive = [&](const char* program, const char* json_name, const std::string& counter) {
    if (!fs::is_regular_file(fs::path(build) / "bench" / "micro" / program)) return -1;
    std::ifstream f(out / "micro" / json_name);
    std::stringstream text;
    text << f.rdbuf();
    const std::string json = text.str();
    const std::string key = "\"" + counter + "\": ";
    int entries = 0;
    for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
      ++entries;
      EXPECT_GT(std::stod(json.substr(at + key.size())), 0.0) << json_name << ": " << json.substr(at, 40);
    }
    return entries;
  };
  if (const int n = count_positive("kolo-bench-overhead", "overhead.json", "us_per_call"); n >= 0) {
    EXPECT_EQ(n, 9) << out / "micro" / "overhead.json";
  }
  if (const int n = count_positive("kolo-bench-transport", "transport.json", "one_way_us"); n >= 0) {
    EXPECT_EQ(n, 2 * 8) << out / "micro" / "transport.json";
  }
  if (const int n = count_positive("kolo-bench-transport", "transport.json", "GB/s"); n >= 0) {
    EXPECT_EQ(n, 2 * 7) << out / "micro" / "transport.json";
  }

  // The barrier's report at 3 ranks, kolo's and Open MPI's: a row per rank and the average of a
  // broadcast after the barrier, a positive number of microseconds.
  for (const char* lib : {"kolo", "mpi"}) {
    const fs::path program = fs::path(build) / "bench" / (std::string(lib) == "kolo" ? "micro/kolo-bench-barrier" : "peers/kolo-bench-barrier-mpi");
    if (!fs::is_regular_file(program) || (std::string(lib) == "mpi" && !have_program("mpirun"))) continue;
    std::ifstream f(out / "micro" / ("barrier_" + std::string(lib) + "_n3.txt"));
    std::string line;
    int rank_rows = 0;
    double average = -1;
    while (std::getline(f, line)) {
      std::istringstream words(line);
      int rank = -1;
      double entered = -1;
      if (line.rfind("  ", 0) == 0 && (words >> rank >> entered) && rank == rank_rows) ++rank_rows;
      const size_t at = line.find("(kolo-perf's -a 1): ");
      if (at != std::string::npos) average = std::stod(line.substr(at + 20));
    }
    EXPECT_EQ(rank_rows, 3) << out / "micro" / ("barrier_" + std::string(lib) + "_n3.txt");
    EXPECT_GT(average, 0.0) << lib;
  }
}

}  // namespace
