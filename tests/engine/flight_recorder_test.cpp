// The flight recorder's entries for operations that completed in their issuing call
// (src/engine/flight_recorder.hpp): written after the fact, they must still read in issue
// order, as done, and be dated one time in 16 (every time when a trace is being written).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/flight_recorder.hpp"

namespace kolo::engine {
namespace {

struct Entry {
  uint64_t seq;
  std::string state, transport;
  uint64_t started_us, finished_us;
};

// The entries of json(), by a pattern independent of the recorder's own code.
std::vector<Entry> entries(const FlightRecorder& fr) {
  const std::string json = fr.json("test");
  static const std::regex one(
      "\\{\"seq\":([0-9]+),\"op\":\"[a-z_]+\",\"bytes\":[0-9]+,\"root\":-?[0-9]+,\"algorithm\":\"[^\"]*\","
      "\"transport\":\"([^\"]*)\",\"state\":\"([a-z]+)\",\"waiting_on\":-?[0-9]+,\"issued_us\":[0-9]+,"
      "\"started_us\":([0-9]+),\"finished_us\":([0-9]+)\\}");
  std::vector<Entry> out;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), one); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back(Entry{std::stoull(m[1]), m[3], m[2], std::stoull(m[4]), std::stoull(m[5])});
  }
  return out;
}

TEST(FlightRecorderDirect, EntriesWrittenAfterTheFactKeepIssueOrderAndOneInSixteenIsDated) {
  ::unsetenv("KOLO_TRACE");
  FlightRecorder fr(256, 0, 2, "test");
  // Queued operations (recorded at issue, finished later) between ones that completed at issue.
  FlightEntry* queued = nullptr;
  for (uint64_t seq = 0; seq < 100; ++seq) {
    if (seq == 40) {
      queued = fr.record(seq, "allreduce", "ring", 4096, -1, /*stamp=*/true);
      continue;
    }
    fr.record_ran(seq, "broadcast", "direct", 8, 0, "shm");
  }
  fr.started(queued, "tcp");
  fr.finished(queued, true);
  const std::vector<Entry> es = entries(fr);
  ASSERT_EQ(es.size(), 100u) << fr.json("test");
  size_t dated = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    EXPECT_EQ(es[i].seq, i) << "entry " << i << " out of issue order";
    EXPECT_EQ(es[i].state, "done") << "entry " << i;
    if (i == 40) {
      EXPECT_EQ(es[i].transport, "tcp");
      EXPECT_GT(es[i].finished_us, 0u) << "a queued operation is always dated";
      continue;
    }
    EXPECT_EQ(es[i].transport, "shm") << "entry " << i;
    EXPECT_EQ(es[i].started_us, es[i].finished_us) << "entry " << i << ": started and finished in one moment";
    if (es[i].finished_us != 0) ++dated;
  }
  EXPECT_EQ(dated, 99u / 16) << "one of 16 direct entries is dated (99 of them)";
}

TEST(FlightRecorderDirect, EveryEntryIsDatedWhileATraceIsWritten) {
  const auto dir = std::filesystem::temp_directory_path() / ("kolo-fr-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "trace.%r.json").string();
  ::setenv("KOLO_TRACE", trace.c_str(), 1);
  {
    FlightRecorder fr(64, 0, 1, "traced");
    for (uint64_t seq = 0; seq < 20; ++seq) fr.record_ran(seq, "barrier", "direct", 0, -1, "local");
    const std::vector<Entry> es = entries(fr);
    ASSERT_EQ(es.size(), 20u);
    for (const Entry& e : es) EXPECT_GT(e.finished_us, 0u) << "entry " << e.seq << " left undated under KOLO_TRACE";
  }
  ::unsetenv("KOLO_TRACE");
  const std::string written = (dir / "trace.0.json").string();
  std::ifstream in(written);
  ASSERT_TRUE(in) << "no trace written to " << written;
  std::stringstream text;
  text << in.rdbuf();
  size_t events = 0;
  for (size_t at = text.str().find("\"barrier #"); at != std::string::npos; at = text.str().find("\"barrier #", at + 1))
    ++events;
  EXPECT_EQ(events, 20u) << text.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kolo::engine
