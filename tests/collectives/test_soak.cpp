// Soak: KOLO_SOAK_COLLECTIVES (default 300) random validated collectives (scenario "random":
// random collective, algorithm, dtype, op, size up to 1 MiB, root, placement, and subgroup
// episodes made by new_group and split) on KOLO_SOAK_RANKS ranks (default 4), once over each
// transport in KOLO_SOAK_TRANSPORTS (default "shm tcp"). Each rank samples its open
// descriptors, resident memory, mapped /dev/shm files and the job's /dev/shm entries every
// KOLO_SOAK_SAMPLE_EVERY collectives (default 25). The test asserts 0 wrong elements and that
// descriptors and shared-memory mappings are the same in every sample after the first (taken
// right after joining), that no entry of the job is in /dev/shm at the last sample nor after the
// run (one may be seen while other ranks set up a subgroup), and that resident memory after
// the first fifth of the run grows by less than KOLO_SOAK_RSS_SLACK_KB (default 16384: the
// allocator keeps freed buffers of up to a few MiB). It prints each rank's min/max per figure;
// scripts/check/soak.sh runs the long version.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "driver_support.hpp"

namespace kolo::coltest {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

struct Sample {
  size_t done;
  long fds, rss_kb, shm_maps, devshm;
};

std::vector<Sample> samples_of(const std::string& out) {
  std::vector<Sample> v;
  const std::regex line(R"(sample ([0-9]+) fds=([0-9]+) rss_kb=([0-9]+) shm_maps=([0-9]+) devshm=([0-9]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    v.push_back({std::stoul((*it)[1]), std::stol((*it)[2]), std::stol((*it)[3]), std::stol((*it)[4]), std::stol((*it)[5])});
  return v;
}

size_t shm_entries_of(const std::string& job) {
  size_t n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      if (std::string(e->d_name).find(job) != std::string::npos) ++n;
    closedir(d);
  }
  return n;
}

void soak(const std::string& transport) {
  const size_t count = std::stoul(env_or("KOLO_SOAK_COLLECTIVES", "300"));
  const int ranks = std::stoi(env_or("KOLO_SOAK_RANKS", "4"));
  const std::string every = env_or("KOLO_SOAK_SAMPLE_EVERY", "25");
  const long rss_slack_kb = std::stol(env_or("KOLO_SOAK_RSS_SLACK_KB", "16384"));
  const std::string seed = env_or("KOLO_SOAK_SEED", "20261125");
  // A generous bound: ~10 ms per collective on a loaded 2-core machine, plus setup.
  LaunchSpec spec = worker_launch("random", ranks, std::chrono::seconds(120 + count / 10), "60");
  spec.args = {"random", seed, std::to_string(count), std::to_string(size_t{1} << 20), every, "1"};
  spec.env["KOLO_TRANSPORT"] = transport;
  spec.env["KOLO_JOB_ID"] = "soak" + std::to_string(getpid()) + transport;
  const WorldOutcome o = run_world(spec);
  ASSERT_TRUE(o.all_succeeded()) << o.describe();
  EXPECT_EQ(shm_entries_of(spec.env["KOLO_JOB_ID"]), 0u) << "the job left names in /dev/shm";
  std::printf("soak %s: %zu collectives (+ subgroup episodes) on %d ranks, seed %s, %.1f s\n", transport.c_str(), count,
              ranks, seed.c_str(), o.seconds);
  for (const RankOutcome& r : o.ranks) {
    const std::vector<Sample> s = samples_of(r.out);
    ASSERT_GE(s.size(), 3u) << "too few samples: " << r.describe();
    auto range = [&](long Sample::*f, size_t from) {
      long lo = s[from].*f, hi = lo;
      for (size_t i = from; i < s.size(); ++i) lo = std::min(lo, s[i].*f), hi = std::max(hi, s[i].*f);
      return std::make_pair(lo, hi);
    };
    const auto fds = range(&Sample::fds, 1);
    const auto maps = range(&Sample::shm_maps, 1);
    const auto devshm = range(&Sample::devshm, 0);
    const size_t warm = std::max<size_t>(1, s.size() / 5);
    const auto rss = range(&Sample::rss_kb, warm);
    const Sample& mid = s[(warm + s.size() - 1) / 2];
    std::printf("  rank %d: %zu samples; fds %ld..%ld, rss_kb %ld..%ld after %zu collectives (%ld at %zu, %ld at %zu, "
                "%ld at the end), shm_maps %ld..%ld, job /dev/shm entries %ld..%ld\n",
                r.rank, s.size(), fds.first, fds.second, rss.first, rss.second, s[warm].done, s[warm].rss_kb, s[warm].done,
                mid.rss_kb, mid.done, s.back().rss_kb, maps.first, maps.second, devshm.first, devshm.second);
    const size_t said = r.out.find("random: ");
    if (r.rank == 0 && said != std::string::npos) std::printf("  %s\n", r.out.substr(said, r.out.find('\n', said) - said).c_str());
    EXPECT_EQ(fds.first, fds.second) << "rank " << r.rank << ": open descriptors changed";
    EXPECT_EQ(maps.first, maps.second) << "rank " << r.rank << ": mapped /dev/shm files changed";
    // A subgroup's segments exist until its members have mapped them: a sample taken while
    // other ranks set one up may see them. None may outlive the setup.
    EXPECT_EQ(s.back().devshm, 0) << "rank " << r.rank << ": the job's names stayed in /dev/shm";
    EXPECT_LE(rss.second - s[warm].rss_kb, rss_slack_kb) << "rank " << r.rank << ": resident memory kept growing";
  }
  std::fflush(stdout);
}

std::vector<std::string> transports() {
  std::istringstream in(env_or("KOLO_SOAK_TRANSPORTS", "shm tcp"));
  std::vector<std::string> v;
  for (std::string t; in >> t;) v.push_back(t);
  return v;
}

TEST(Soak, RandomCollectivesStayCorrectAndLeakNothing) {
  for (const std::string& t : transports()) {
    SCOPED_TRACE("transport " + t);
    soak(t);
  }
}

}  // namespace
}  // namespace kolo::coltest
