// bench/common: the command line shared by kolo-perf and the peers (every nccl-tests flag through
// getopt_long, the drop-in program names, --json, --csv, --min-bw, NCCL_TESTS_MIN_BW and
// KOLO_PERF_MIN_BW), nccl-tests' shapes and busbw factors for all nine collectives, the exit
// status, nccl-tests' fixed-width numbers, its -J document, and the JSON/CSV rows the Reporter writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "barrier_skew.hpp"
#include "collective_specs.hpp"
#include "common_options.hpp"
#include "nccl_json.hpp"
#include "report.hpp"
#include "sizes.hpp"
#include "usage_error.hpp"

namespace kolo::bench {
namespace {

struct Parsed {
  CommonOptions o;
  std::vector<std::pair<std::string, std::string>> extra;
};

Parsed parse(std::vector<std::string> args, std::string program = "prog") {
  std::vector<char*> argv{program.data()};
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
  EXPECT_EQ(o.blocking_mode, Blocking::wait_barrier);
  EXPECT_EQ(o.json_path, "/tmp/a.json");
  EXPECT_EQ(o.csv_path, "/tmp/a.csv");
  EXPECT_DOUBLE_EQ(o.min_bw, 1.5);
  ASSERT_EQ(p.extra.size(), 2u);
  EXPECT_EQ(p.extra[0], std::make_pair(std::string("-T"), std::string("9")));
  EXPECT_EQ(p.extra[1], std::make_pair(std::string("--algo"), std::string("ring")));
}

TEST(BenchOptions, TheRestOfNcclTestsFlagsShortAndLong) {
  const Parsed p = parse({"-t", "1", "-g", "2", "-m", "3", "-N", "4", "-p", "1", "-c", "5", "-y", "1", "-G", "6",
                          "-C", "1", "-S", "1", "-J", "/tmp/r.json", "-R", "1", "-x", "1", "-D", "1", "-V", "8",
                          "-M", "1", "-u", "2", "-I", "1", "-K", "3", "-z", "3", "-b1.5K", "gather"});
  const CommonOptions& o = p.o;
  EXPECT_EQ(o.collective, "gather");
  EXPECT_EQ(o.agg_iters, 3);
  EXPECT_EQ(o.run_cycles, 4);
  EXPECT_EQ(o.check_iters, 5);
  EXPECT_TRUE(o.check);
  EXPECT_TRUE(o.report_cputime);
  EXPECT_TRUE(o.report_timestamps);
  EXPECT_EQ(o.output_file, "/tmp/r.json");
  EXPECT_EQ(o.unalign, 2);
  EXPECT_EQ(o.blocking_mode, Blocking::wait_barrier_untimed);
  EXPECT_EQ(o.min_bytes, 1536u);
  EXPECT_TRUE(o.per_iter_timing);
  EXPECT_EQ(o.per_iter_skip, 3);
  // -t 1 changes nothing; every other GPU flag given a value that matters leaves a note.
  ASSERT_EQ(o.notes.size(), 9u);
  EXPECT_EQ(o.notes[0].rfind("-g 2: ", 0), 0u) << o.notes[0];
  EXPECT_EQ(o.notes[2].rfind("-y 1: ", 0), 0u) << o.notes[2];
  EXPECT_EQ(o.notes[3].rfind("-G 6: ", 0), 0u) << o.notes[3];
  const Parsed l = parse({"--nthreads=1", "--ngpus", "1", "--agg_iters", "2", "--run_cycles=0", "--parallel_init", "0",
                          "--check", "0", "--stream_null", "0", "--cudagraph", "0", "--report_cputime", "0",
                          "--report_timestamps", "0", "--output_file", "o.json", "--local_register", "0",
                          "--device_implementation", "0", "--device_cta_count", "16", "--memory", "0", "--unalign", "0",
                          "--per_iter_timing", "0", "--per_iter_skip", "0", "--blocking", "2", "--average", "0",
                          "--minbytes", "8", "--maxbytes", "8", "--stepbytes", "8", "--stepfactor", "2", "--iters", "3",
                          "--warmup_iters", "0", "--op", "min", "--datatype", "int8", "--root", "1", "--timeout", "5",
                          "allreduce"});
  EXPECT_EQ(l.o.agg_iters, 2);
  EXPECT_EQ(l.o.run_cycles, 0);
  EXPECT_FALSE(l.o.check);
  EXPECT_EQ(l.o.blocking_mode, Blocking::wait);
  EXPECT_EQ(l.o.combine, TimeCombine::rank0);
  EXPECT_EQ(l.o.output_file, "o.json");
  EXPECT_TRUE(l.o.notes.empty()) << l.o.notes[0];
  ASSERT_EQ(l.extra.size(), 1u);
  EXPECT_EQ(l.extra[0], std::make_pair(std::string("-T"), std::string("5")));
  // nccl-tests' corrections of -K: out of range, or without -I.
  const Parsed k = parse({"allreduce", "-n", "4", "-I", "1", "-K", "4"});
  EXPECT_EQ(k.o.per_iter_skip, 0);
  ASSERT_EQ(k.o.notes.size(), 1u);
  EXPECT_EQ(k.o.notes[0], "per-iteration skip (-K) must be between 0 and 3. Disabling.");
  EXPECT_EQ(parse({"allreduce", "-K", "2"}).o.per_iter_skip, 0);
}

TEST(BenchReport, NcclTestsPerIterationStatistics) {
  const IterStats st = iter_stats({100, 1, 2, 3, 4}, 1);  // the 100 is skipped
  EXPECT_DOUBLE_EQ(st.min, 1);
  EXPECT_DOUBLE_EQ(st.max, 4);
  EXPECT_DOUBLE_EQ(st.avg, 2.5);
  EXPECT_DOUBLE_EQ(st.p50, 3);  // sorted[n / 2]
  EXPECT_DOUBLE_EQ(st.p99, 4);  // nearest rank
  EXPECT_NEAR(st.stdev, std::sqrt(1.25), 1e-12);
  EXPECT_NEAR(st.cv_pct, std::sqrt(1.25) / 2.5 * 100, 1e-9);
}

TEST(BenchOptions, NcclTestsProgramNamesImplyTheCollective) {
  EXPECT_EQ(parse({"-b", "8"}, "/usr/bin/all_gather_perf").o.collective, "allgather");
  EXPECT_EQ(parse({}, "reduce_scatter_perf").o.collective, "reducescatter");
  EXPECT_EQ(parse({"all_reduce"}, "all_reduce_perf").o.collective, "allreduce");
  EXPECT_THROW(parse({"broadcast"}, "all_reduce_perf"), UsageError);
  EXPECT_EQ(parse({}, "sendrecv_perf").o.program, "sendrecv_perf");
  for (const char* c : {"allreduce", "allgather", "broadcast", "reduce", "reducescatter", "alltoall", "scatter",
                        "gather", "sendrecv"}) {
    EXPECT_EQ(collective_of_program(program_of_collective(c)), c);
  }
  EXPECT_EQ(collective_of_program("kolo-perf"), "");
}

TEST(BenchOptions, MinBwFromTheEnvironmentUnlessGiven) {
  setenv("NCCL_TESTS_MIN_BW", "3.5", 1);
  setenv("KOLO_PERF_MIN_BW", "2.25", 1);
  EXPECT_DOUBLE_EQ(parse({"allreduce"}).o.min_bw, 3.5);  // nccl-tests' name first
  unsetenv("NCCL_TESTS_MIN_BW");
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
  EXPECT_THROW(parse({"allreduce", "-z", "4"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-c", "-1"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-G", "x"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-J", ""}), UsageError);
  try {
    parse({"allreduce", "-Q", "1"});
    ADD_FAILURE() << "-Q accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown option '-Q'");
  }
  try {
    parse({"allreduce", "--iters"});
    ADD_FAILURE() << "--iters with no value accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "option '--iters' needs a value");
  }
  EXPECT_THROW(parse({"allreduce", "-b", "2M", "-e", "1M"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-b", "12Q"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "--min-bw", "-1"}), UsageError);
  EXPECT_THROW(parse({"allreduce", "--json", ""}), UsageError);
  EXPECT_THROW(parse({"allreduce", "-i", "0"}), UsageError);
}

// A program with device memory (kolo-perf: own_gpu_flags) reads -g and -G for itself, unnoted;
// the peers (host memory only) keep noting them.
TEST(BenchOptions, OwnGpuFlagsAreReadNotNoted) {
  const auto own = [](std::vector<std::string> args) {
    std::string program = "prog";
    std::vector<char*> argv{program.data()};
    for (std::string& a : args) argv.push_back(a.data());
    CommonOptions o;
    o.own_gpu_flags = true;
    parse_common(static_cast<int>(argv.size()), argv.data(), o, {}, [](const std::string&, const std::string&) {});
    return o;
  };
  const CommonOptions g = own({"allreduce", "-g", "1", "--cudagraph", "3"});
  EXPECT_EQ(g.gpus, 1);
  EXPECT_EQ(g.cuda_graph, 3);
  EXPECT_TRUE(g.notes.empty()) << g.notes[0];
  EXPECT_EQ(own({"allreduce"}).gpus, 0);  // kolo's default: host memory
  EXPECT_EQ(own({"allreduce", "--ngpus=0"}).gpus, 0);
  EXPECT_THROW(own({"allreduce", "-g", "-1"}), UsageError);
  EXPECT_THROW(own({"allreduce", "-G", "x"}), UsageError);
  const Parsed peer = parse({"allreduce", "-g", "2", "-G", "1"});
  EXPECT_EQ(peer.o.gpus, 0);
  ASSERT_EQ(peer.o.notes.size(), 2u);
  EXPECT_EQ(peer.o.notes[0].rfind("-g 2: ", 0), 0u);
}

// kolo-bench-barrier's report: offsets from the first rank to leave, per-call times from each
// rank's own exit, warm-up rows left out, the average over ranks.
TEST(BarrierSkew, MediansAreRelativeToTheFirstRankToLeave) {
  const int ranks = 2, rows = 5, skip = 2, per_row = 4;
  std::vector<SkewRow> all(static_cast<size_t>(ranks * rows));
  for (int r = 0; r < rows; ++r) {
    const double t = 1000.0 * r;
    // Rank 1 leaves 3 us after rank 0 and finishes 8 us after its own exit; rank 0 takes 12.
    all[r] = {t, t + 10, t + 11, t + 22};
    all[rows + r] = {t + 1, t + 13, t + 15, t + 21};
  }
  all[0] = {0, 500, 500, 9000};  // a warm-up row that must not count
  testing::internal::CaptureStdout();
  print_skew("lib", ranks, rows, skip, per_row, std::vector<double>(reinterpret_cast<double*>(all.data()),
                                                                 reinterpret_cast<double*>(all.data()) + all.size() * kSkewFields));
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("lib, 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("medians over 3 rows"), std::string::npos) << out;
  // rank, entered, left, first done, last done, us per call
  EXPECT_NE(out.find("0         0.00         0.00         1.00        12.00            3.000"), std::string::npos) << out;
  EXPECT_NE(out.find("1         1.00         3.00         5.00        11.00            2.000"), std::string::npos) << out;
  EXPECT_NE(out.find("2.500 us per broadcast"), std::string::npos) << out;
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
  // nccl-tests' parsesize takes fractions (common/byte_size.hpp, shared with KOLO_* sizes).
  EXPECT_EQ(parse_size("1.5K", "-b"), 1536u);
  EXPECT_EQ(parse_size("0.25m", "-b"), size_t{1} << 18);
  EXPECT_EQ(parse_size("1.25", "-b"), 1u);
  for (const char* bad : {"", "K", "1.", ".5", "1.5.K", "-1", "1KB", "18446744073709551616", "17179869184G"}) {
    EXPECT_THROW(parse_size(bad, "-b"), UsageError) << bad;
  }
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

TEST(BenchReport, ExitStatusIsNcclTests7OnWrongOrBelowNinetyPercentOfTheFloor) {
  EXPECT_EQ(kExitTestFailure, 7);
  EXPECT_EQ(exit_status(0, 1.0, 0), kExitOk);
  EXPECT_EQ(exit_status(0, 1.0, 1.0), kExitOk);
  EXPECT_EQ(exit_status(0, 0.9, 1.0), kExitOk);  // nccl-tests' tolerance: 0.9 x the floor passes
  EXPECT_EQ(exit_status(0, 0.89, 1.0), kExitTestFailure);
  EXPECT_EQ(exit_status(3, 5.0, 1.0), kExitTestFailure);
  EXPECT_EQ(exit_status(3, 5.0, 0), kExitTestFailure);
}

TEST(BenchReport, NcclTestsFixedWidthNumbers) {
  EXPECT_EQ(fixed_width(12.5, 6), " 12.50");
  EXPECT_EQ(fixed_width(999.99, 6), "999.99");
  EXPECT_EQ(fixed_width(1234.56, 6), "1234.6");  // >= 1000 GB/s keeps the column 6 wide
  EXPECT_EQ(fixed_width(123456.7, 6), "123457");
  EXPECT_EQ(fixed_width(1234567.0, 6), " 1e+06");
  EXPECT_EQ(fixed_width(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(fixed_width(3.14159, 7), "   3.14");
}

TEST(BenchReport, WritesNcclTestsJsonDocument) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("bench_nccl_json_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string line;
  EXPECT_EQ(claim_json_path((dir / "r.txt").string(), line), "");  // nccl-tests writes only .json
  EXPECT_EQ(line, "");
  std::ofstream((dir / "r.json").string()) << "taken";
  CommonOptions o;
  o.collective = "allreduce";
  o.output_file = (dir / "r.json").string();
  o.args = {"all_reduce_perf", "-J", o.output_file};
  o.min_bw = 1.0;
  Reporter r(true, {"kolo-perf", "kolo", 2}, o);
  r.preamble({{0, 11, "h"}, {1, 12, "h"}}, "[kolo]");
  r.begin_row("allreduce", 1024, 256, "float", "sum", -1);
  r.measurement(false, 10.0, 0.1, 0.2, 0);
  r.measurement(true, 5.0, 0.3, 4.0, -1);
  r.end_row();
  EXPECT_EQ(r.finish(), kExitOk);  // (0.2 + 4) / 2 = 2.1 GB/s against a 1 GB/s floor
  EXPECT_EQ(slurp(dir / "r.json"), "taken");  // never overwritten: r.json.0 instead
  const nlohmann::json doc = nlohmann::json::parse(slurp(dir / "r.json.0"));
  EXPECT_EQ(doc["version"], 3);
  EXPECT_EQ(doc["args"][0], "all_reduce_perf");
  EXPECT_EQ(doc["config"]["iterations"], 20);
  EXPECT_EQ(doc["config"]["blocking_collectives"], "false");
  ASSERT_EQ(doc["config"]["devices"].size(), 2u);
  EXPECT_EQ(doc["config"]["devices"][1]["device"], 1);  // second rank on host h
  ASSERT_EQ(doc["results"].size(), 1u);
  const nlohmann::json& row = doc["results"][0];
  EXPECT_EQ(row["root"], "    -1");
  EXPECT_DOUBLE_EQ(row["out_of_place"]["time"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(row["out_of_place"]["nwrong"].get<double>(), 0.0);
  EXPECT_TRUE(row["in_place"]["nwrong"].is_null());
  EXPECT_DOUBLE_EQ(row["in_place"]["bus_bw"].get<double>(), 4.0);
  EXPECT_EQ(doc["out_of_bounds"]["okay"], "true");
  EXPECT_EQ(doc["average_bus_bandwidth"]["okay"], "true");
  EXPECT_TRUE(doc["errors"].empty());
  std::filesystem::remove_all(dir);
}

TEST(BenchReport, ARunCutShortStillLeavesACompleteNcclTestsDocument) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("bench_nccl_cut_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CommonOptions o;
  o.collective = "broadcast";
  o.output_file = (dir / "cut.json").string();
  {
    Reporter r(true, {"kolo-perf", "kolo", 1}, o);
    r.preamble({{0, 11, "h"}}, "[kolo]");
    r.begin_row("broadcast", 8, 2, "float", "none", 0);
    r.measurement(false, 1.0, 0.01, 0.01, 0);
    r.measurement(true, 1.0, 0.01, 0.01, 0);
    r.end_row();
    r.begin_row("broadcast", 64, 16, "float", "none", 0);
    r.end_row();  // as after an exception: no finish()
  }
  const nlohmann::json doc = nlohmann::json::parse(slurp(dir / "cut.json"));
  EXPECT_EQ(doc["results"].size(), 1u);
  ASSERT_EQ(doc["errors"].size(), 1u);
  EXPECT_NE(doc["errors"][0].get<std::string>().find("ended before"), std::string::npos);
  std::filesystem::remove_all(dir);
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
  EXPECT_EQ(r.finish(), kExitTestFailure);  // (0.1024 + 3) / 2 = 1.5512 GB/s, below 0.9 x the 2 GB/s floor
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
  const nlohmann::json doc = nlohmann::json::parse(json);
  ASSERT_EQ(doc["rows"].size(), 2u) << json;
  const nlohmann::json& in = doc["rows"][1];
  EXPECT_EQ(in["placement"], "in");
  EXPECT_DOUBLE_EQ(in["time_us"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(in["algbw_gbs"].get<double>(), 0.2048);
  EXPECT_DOUBLE_EQ(in["busbw_gbs"].get<double>(), 3.0);
  EXPECT_TRUE(in["wrong"].is_null());
  EXPECT_EQ(doc["rows"][0]["wrong"], 0);
  EXPECT_NE(json.find("\"total_wrong\": 0"), std::string::npos);
  EXPECT_NE(json.find("\"exit_status\": 7"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::bench
