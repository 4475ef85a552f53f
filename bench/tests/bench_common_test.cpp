// bench/common: the command line shared by kolo-perf and the peers (nccl-tests' flags, --json,
// --csv, --min-bw and KOLO_PERF_MIN_BW), nccl-tests' shapes and busbw factors for all nine
// collectives, the exit status, and the JSON/CSV rows the Reporter writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collective_specs.hpp"
#include "common_options.hpp"
#include "report.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

struct Parsed {
  CommonOptions o;
  std::vector<std::pair<std::string, std::string>> extra;
};

Parsed parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("prog")};
  for (std::string& a : args) argv.push_back(a.data());
  Parsed p;
  parse_common(static_cast<int>(argv.size()), argv.data(), p.o, {{"-T", "--timeout"}, {"", "--algo"}},
               [&p](const std::string& flag, const std::string& value) { p.extra.emplace_back(flag, value); });
  return p;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(BenchOptions, EveryNcclTestsFlagAndOurs) {
  const Parsed p = parse({"all_reduce", "-b", "8", "-e", "1M", "-i", "4K", "-f", "2", "-n", "7", "-w", "0", "-c", "0",
                          "-o", "max", "-d", "double", "-r", "1", "-a", "2", "-z", "1", "--json=/tmp/a.json", "--csv",
                          "/tmp/a.csv", "--min-bw", "1.5", "-T", "9", "--algo", "ring"});
  const CommonOptions& o = p.o;
  EXPECT_EQ(o.collective, "allreduce");
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 1u << 20);
  EXPECT_EQ(o.step_bytes, 4096u);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 0);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.op_text, "max");
  EXPECT_EQ(o.dtype_text, "double");
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.combine, TimeCombine::minimum);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.json_path, "/tmp/a.json");
  EXPECT_EQ(o.csv_path, "/tmp/a.csv");
  EXPECT_DOUBLE_EQ(o.min_bw, 1.5);
  ASSERT_EQ(p.extra.size(), 2u);
  EXPECT_EQ(p.extra[0], std::make_pair(std::string("-T"), std::string("9")));
  EXPECT_EQ(p.extra[1], std::make_pair(std::string("--algo"), std::string("ring")));
}

TEST(BenchOptions, MinBwFromTheEnvironmentUnlessGiven) {
  setenv("KOLO_PERF_MIN_BW", "2.25", 1);
  EXPECT_DOUBLE_EQ(parse({"allreduce"}).o.min_bw, 2.25);
  EXPECT_DOUBLE_EQ(parse({"allreduce", "--min-bw", "0.5"}).o.min_bw, 0.5);
  setenv("KOLO_PERF_MIN_BW", "fast", 1);
  EXPECT_THROW(parse({"allreduce"}), UsageError);
  unsetenv("KOLO_PERF_MIN_BW");
  EXPECT_DOUBLE_EQ(parse({"allreduce"}).o.min_bw, 0.0);
}

TEST(BenchOptions, Refusals) {
  EXPECT_THROW(parse({}), UsageError);
  EXPECT_THROW(parse({"allreduce", "extra"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "--bogus", "1"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-n"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-n", "0"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-a", "4"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-z", "2"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-b", "2M", "-e", "1M"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-b", "12Q"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "--min-bw", "-1"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "--json", ""}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-i", "0"}), UsageError);
}

TEST(BenchSizes, NcclTestsSweep) {
  std::vector<size_t> seen;
  for (size_t s = 0;;) {  // -b 0 -f 4 -e 64: 0 is never stuck
    seen.push_back(s);
    if (!next_size(s, 64, 0, 4)) break;
  }
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 4, 16, 64}));
  size_t s = 10;
  EXPECT_TRUE(next_size(s, 30, 10, 1));
  EXPECT_EQ(s, 20u);
  size_t huge = ~size_t{0} - 1;
  EXPECT_FALSE(next_size(huge, ~size_t{0}, 0, 2));
  EXPECT_EQ(parse_size("3G", "-e"), size_t{3} << 30);
}

TEST(BenchCollectives, NcclTestsShapesAndBusBandwidthFactors) {
  struct Expected {
    const char* name;
    double factor_at_4;
    size_t send, recv, param;  // for 10 elements on 4 ranks
  };
  const Expected table[] = {
      {"allreduce", 1.5, 10, 10, 10},   {"broadcast", 1.0, 10, 10, 10}, {"reduce", 1.0, 10, 10, 10},
      {"allgather", 0.75, 2, 8, 2},     {"reducescatter", 0.75, 8, 2, 2}, {"alltoall", 0.75, 8, 8, 2},
      {"gather", 0.75, 2, 8, 2},        {"scatter", 0.75, 8, 2, 2},       {"sendrecv", 1.0, 10, 10, 10},
  };
  for (const Expected& e : table) {
    const CollectiveSpec& spec = find_collective(e.name);
    EXPECT_DOUBLE_EQ(spec.busbw_factor(4), e.factor_at_4) << e.name;
    const Shape s = spec.shape(10, 4);
    EXPECT_EQ(s.send_count, e.send) << e.name;
    EXPECT_EQ(s.recv_count, e.recv) << e.name;
    EXPECT_EQ(s.param_count, e.param) << e.name;
  }
  EXPECT_EQ(&find_collective("reduce_scatter"), &find_collective("reducescatter"));
  EXPECT_THROW(find_collective("allfoo"), UsageError);
}

TEST(BenchReport, ExitStatusGatesOnWrongThenOnTheFloor) {
  EXPECT_EQ(exit_status(0, 1.0, 0), kExitOk);
  EXPECT_EQ(exit_status(0, 1.0, 1.0), kExitOk);
  EXPECT_EQ(exit_status(0, 0.99, 1.0), kExitBelowMinBw);
  EXPECT_EQ(exit_status(3, 5.0, 1.0), kExitWrongResults);
}

TEST(BenchReport, WritesEveryRowAsJsonAndCsv) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("bench_common_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CommonOptions o;
  o.collective = "allreduce";
  o.json_path = (dir / "r.json").string();
  o.csv_path = (dir / "r.csv").string();
  o.min_bw = 2.0;
  Reporter r(true, {"kolo-perf-x", "lib, with \"comma\"", 2}, o);
  r.begin_row("allreduce", 1024, 256, "float", "sum", -1);
  r.measurement(false, 10.0, 0.1024, 0.1024, 0);
  r.measurement(true, 5.0, 0.2048, 3.0, -1);
  r.end_row();
  EXPECT_DOUBLE_EQ(r.average_busbw(), (0.1024 + 3.0) / 2);
  EXPECT_EQ(r.finish(), kExitBelowMinBw);  // (0.1024 + 3) / 2 = 1.5512 GB/s, below the 2 GB/s floor
  const std::string csv = slurp(dir / "r.csv");
  EXPECT_NE(csv.find("program,library,nranks,collective,size_bytes,count,type,redop,root,placement,time_us,algbw_gbs,"
                     "busbw_gbs,wrong\n"),
            std::string::npos);
  EXPECT_NE(csv.find("kolo-perf-x,\"lib, with \"\"comma\"\"\",2,allreduce,1024,256,float,sum,-1,out,10,0.1024,0.1024,0\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",in,5,0.2048,3,\n"), std::string::npos) << csv;
  const std::string json = slurp(dir / "r.json");
  EXPECT_NE(json.find("\"library\": \"lib, with \\\"comma\\\"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"placement\": \"in\", \"time_us\": 5, \"algbw_gbs\": 0.2048, \"busbw_gbs\": 3, \"wrong\": null"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"total_wrong\": 0"), std::string::npos);
  EXPECT_NE(json.find("\"exit_status\": 4"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::bench
