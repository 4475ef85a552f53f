// What each rank is given: rendezvous variables, -x additions, arguments, stdin.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "kolorun_process.hpp"

namespace kolo::launcher::testing {
namespace {

// What one rank of probe_env reported.
struct RankReport {
  std::map<std::string, std::string> env;
  std::map<int, std::string> args;
  std::string stdin_line;
  std::string cpus;  // the CPUs it may run on, "0,1"
  bool seen = false;
};

// Parses "[r]: ENV NAME=VALUE" / "[r]: ARG i=VALUE" / "[r]: STDIN=..." lines (tagged output).
std::vector<RankReport> parse_reports(const std::string& out, int nproc) {
  std::vector<RankReport> reports(static_cast<size_t>(nproc));
  for (const std::string& line : split_lines(out)) {
    size_t close = line.find("]: ");
    if (line.empty() || line[0] != '[' || close == std::string::npos) {
      ADD_FAILURE() << "untagged line: " << line;
      continue;
    }
    int rank = std::stoi(line.substr(1, close - 1));
    if (rank < 0 || rank >= nproc) {
      ADD_FAILURE() << "line from rank " << rank << " of " << nproc;
      continue;
    }
    RankReport& report = reports[static_cast<size_t>(rank)];
    report.seen = true;
    std::string body = line.substr(close + 3);
    if (body.rfind("ENV ", 0) == 0) {
      size_t eq = body.find('=');
      report.env[body.substr(4, eq - 4)] = body.substr(eq + 1);
    } else if (body.rfind("ARG ", 0) == 0) {
      size_t eq = body.find('=');
      report.args[std::stoi(body.substr(4, eq - 4))] = body.substr(eq + 1);
    } else if (body.rfind("CPUS=", 0) == 0) {
      report.cpus = body.substr(5);
    } else if (body.rfind("STDIN=", 0) == 0) {
      report.stdin_line = body.substr(6);
    }
  }
  return reports;
}

bool is_lower_hex(const std::string& s, size_t length) {
  return s.size() == length && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The kernel's ephemeral port range, read independently of kolorun.
std::pair<int, int> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 1024, high = 65535;
  in >> low >> high;
  return {low, high};
}

TEST(KolorunEnvironment, EveryRankGetsItsRendezvousVariablesForOneToEightRanks) {
  const auto [port_low, port_high] = ephemeral_port_range();
  std::set<std::string> job_ids, secrets;
  for (int nproc = 1; nproc <= 8; ++nproc) {
    SCOPED_TRACE("nproc=" + std::to_string(nproc));
    ProcessResult result = run_kolorun({"-t", "-n", std::to_string(nproc), probe_path("KOLO_PROBE_ENV")});
    ASSERT_EQ(result.exit_code(), 0) << result.err;
    EXPECT_EQ(result.err, "");
    std::vector<RankReport> reports = parse_reports(result.out, nproc);
    const RankReport& first = reports[0];
    for (int r = 0; r < nproc; ++r) {
      const RankReport& report = reports[static_cast<size_t>(r)];
      ASSERT_TRUE(report.seen) << "no output from rank " << r;
      const auto& env = report.env;
      EXPECT_EQ(env.at("RANK"), std::to_string(r));
      EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(r));
      EXPECT_EQ(env.at("WORLD_SIZE"), std::to_string(nproc));
      EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), std::to_string(nproc));
      EXPECT_EQ(env.at("GROUP_RANK"), "0");
      EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
      int port = std::stoi(env.at("MASTER_PORT"));
      EXPECT_GE(port, port_low);
      EXPECT_LE(port, port_high);
      EXPECT_TRUE(is_lower_hex(env.at("KOLO_JOB_ID"), 16)) << env.at("KOLO_JOB_ID");
      EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), env.at("KOLO_JOB_ID"));
      EXPECT_TRUE(is_lower_hex(env.at("KOLO_SECRET"), 32)) << env.at("KOLO_SECRET");
      // Shared by the whole job.
      // kolorun hosts the store itself, on loopback, beside MASTER_PORT (left to the program).
      EXPECT_EQ(env.at("KOLO_STORE_ADDR").rfind("127.0.0.1:", 0), 0u) << env.at("KOLO_STORE_ADDR");
      EXPECT_NE(env.at("KOLO_STORE_ADDR"), "127.0.0.1:" + env.at("MASTER_PORT"));
      for (const char* shared : {"MASTER_PORT", "KOLO_JOB_ID", "KOLO_SECRET", "KOLO_STORE_ADDR"})
        EXPECT_EQ(env.at(shared), first.env.at(shared)) << shared << " differs on rank " << r;
      // kolorun's own environment reaches the ranks.
      EXPECT_EQ(env.at("KOLO_LAUNCH_GRACE"), "1");
    }
    job_ids.insert(first.env.at("KOLO_JOB_ID"));
    secrets.insert(first.env.at("KOLO_SECRET"));
  }
  EXPECT_EQ(job_ids.size(), 8u) << "job ids repeat across launches";
  EXPECT_EQ(secrets.size(), 8u) << "secrets repeat across launches";
}

TEST(KolorunEnvironment, OptionsExtraVariablesArgumentsAndInheritedSecretReachTheRanks) {
  ProcessResult result = run_kolorun(
      {"--tag-output", "--nproc=3", "--master-addr", "10.1.2.3", "--master-port", "29511", "-x", "FOO=bar",
       "-x", "EQUALS=a=b", "-x", "PATH=/usr/bin:/bin", "--", probe_path("KOLO_PROBE_ENV"), "first", "-n",
       "2"},
      {{"KOLO_SECRET", "00112233445566778899aabbccddeeff"}, {"RANK", "stale"}});
  ASSERT_EQ(result.exit_code(), 0) << result.err;
  std::vector<RankReport> reports = parse_reports(result.out, 3);
  for (int r = 0; r < 3; ++r) {
    const RankReport& report = reports[static_cast<size_t>(r)];
    ASSERT_TRUE(report.seen);
    EXPECT_EQ(report.env.at("MASTER_ADDR"), "10.1.2.3");
    EXPECT_EQ(report.env.at("MASTER_PORT"), "29511");
    EXPECT_EQ(report.env.at("FOO"), "bar");
    EXPECT_EQ(report.env.at("EQUALS"), "a=b");
    EXPECT_EQ(report.env.at("PATH"), "/usr/bin:/bin");
    EXPECT_EQ(report.env.at("KOLO_SECRET"), "00112233445566778899aabbccddeeff");
    EXPECT_EQ(report.env.at("RANK"), std::to_string(r)) << "a stale RANK must be replaced";
    EXPECT_EQ(report.args, (std::map<int, std::string>{{1, "first"}, {2, "-n"}, {3, "2"}}));
  }
}

// The CPUs this test (and so kolorun, started from it) may run on, read independently of kolorun.
std::vector<std::string> test_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<std::string> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(std::to_string(c));
  return cpus;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

TEST(KolorunEnvironment, RanksAreBoundOnePerCpuWhenTheyFitAndToldNotToYieldAtEveryPoll) {
  const std::vector<std::string> cpus = test_cpus();
  ASSERT_FALSE(cpus.empty());
  const int n = std::min<int>(2, static_cast<int>(cpus.size()));
  for (const char* mode : {"auto", "core"}) {
    ProcessResult result = run_kolorun({"--tag-output", "--bind-to", mode, "-n", std::to_string(n), "--", probe_path("KOLO_PROBE_ENV")}, {});
    ASSERT_EQ(result.exit_code(), 0) << result.err;
    std::vector<RankReport> reports = parse_reports(result.out, n);
    for (int r = 0; r < n; ++r) {
      const RankReport& report = reports[static_cast<size_t>(r)];
      ASSERT_TRUE(report.seen);
      EXPECT_EQ(report.cpus, cpus[static_cast<size_t>(r)]) << mode << ": rank " << r << " on the " << r << "-th CPU alone";
      EXPECT_EQ(report.env.count("KOLO_YIELD_WHEN_IDLE") ? report.env.at("KOLO_YIELD_WHEN_IDLE") : "", "0") << mode;
    }
  }
  // A value the user gave stays.
  ProcessResult kept = run_kolorun({"--tag-output", "-x", "KOLO_YIELD_WHEN_IDLE=1", "-n", "1", "--", probe_path("KOLO_PROBE_ENV")}, {});
  ASSERT_EQ(kept.exit_code(), 0) << kept.err;
  EXPECT_EQ(parse_reports(kept.out, 1)[0].env.at("KOLO_YIELD_WHEN_IDLE"), "1");
}

TEST(KolorunEnvironment, RanksAreLeftUnboundWithBindToNoneOrMoreRanksThanCpus) {
  const std::vector<std::string> cpus = test_cpus();
  const int more = static_cast<int>(cpus.size()) + 1;
  struct Case {
    std::vector<std::string> args;
    int n;
  };
  for (const Case& c : {Case{{"--bind-to", "none", "-n", "2"}, 2}, Case{{"-n", std::to_string(more)}, more}}) {
    std::vector<std::string> args = {"--tag-output"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--", probe_path("KOLO_PROBE_ENV")});
    ProcessResult result = run_kolorun(args, {});
    ASSERT_EQ(result.exit_code(), 0) << result.err;
    std::vector<RankReport> reports = parse_reports(result.out, c.n);
    for (const RankReport& report : reports) {
      ASSERT_TRUE(report.seen);
      EXPECT_EQ(report.cpus, joined(cpus)) << "every CPU kolorun may use";
      EXPECT_EQ(report.env.count("KOLO_YIELD_WHEN_IDLE"), 0u);
    }
  }
  // --bind-to core refuses what it cannot do, before starting anything.
  ProcessResult refused = run_kolorun({"--bind-to", "core", "-n", std::to_string(more), "--", probe_path("KOLO_PROBE_ENV")}, {});
  EXPECT_EQ(refused.exit_code(), 2);
  EXPECT_NE(refused.err.find("--bind-to core"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
}

TEST(KolorunEnvironment, OnlyRankZeroReadsAPipedStdin) {
  ProcessResult result =
      run_kolorun({"-t", "-n", "3", probe_path("KOLO_PROBE_ENV")}, {}, 15, "hello from stdin\nsecond\n");
  ASSERT_EQ(result.exit_code(), 0) << result.err;
  std::vector<RankReport> reports = parse_reports(result.out, 3);
  EXPECT_EQ(reports[0].stdin_line, "hello from stdin");
  EXPECT_EQ(reports[1].stdin_line, "");
  EXPECT_EQ(reports[2].stdin_line, "");
}

TEST(KolorunEnvironment, HelpVersionAndUsageErrors) {
  ProcessResult help = run_kolorun({"--help"});
  EXPECT_EQ(help.exit_code(), 0);
  EXPECT_NE(help.out.find("Usage: kolorun"), std::string::npos);
  ProcessResult version = run_kolorun({"--version"});
  EXPECT_EQ(version.exit_code(), 0);
  EXPECT_EQ(version.out.rfind("kolorun (kolo) ", 0), 0u) << version.out;

  ProcessResult missing = run_kolorun({probe_path("KOLO_PROBE_ENV")});
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_NE(missing.err.find("kolorun: -n/--nproc is required"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, "") << "nothing may run on a usage error";

  ProcessResult bad_grace = run_kolorun({"-n", "1", probe_path("KOLO_PROBE_ENV")}, {{"KOLO_LAUNCH_GRACE", "x"}});
  EXPECT_EQ(bad_grace.exit_code(), 2);
  EXPECT_NE(bad_grace.err.find("KOLO_LAUNCH_GRACE"), std::string::npos) << bad_grace.err;
}

}  // namespace
}  // namespace kolo::launcher::testing
