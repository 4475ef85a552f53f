// --tag-output: every line prefixed with its rank, nothing lost, stdout and stderr kept apart.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "kolorun_process.hpp"

namespace kolo::launcher::testing {
namespace {

constexpr int kLines = 200;

// Checks one stream of tagged probe_output lines: per rank, kind lines 0..kLines-1 in order,
// each under its own rank's tag; plus, for stdout, the unfinished "tail" line last.
void expect_tagged_stream(const std::string& text, const std::string& kind, int nproc, bool with_tail) {
  const std::regex line_pattern(R"(\[(\d+)\]: (out|err|tail) (\d+)(?: (\d+))?)");
  std::map<int, int> next_index;  // rank -> next expected line number
  std::map<int, bool> tail_seen;
  for (const std::string& line : split_lines(text)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_pattern)) << "malformed line: '" << line << "'";
    int tag = std::stoi(m[1]);
    int rank_in_text = std::stoi(m[3]);
    EXPECT_EQ(tag, rank_in_text) << "line tagged with the wrong rank: " << line;
    if (m[2] == "tail") {
      EXPECT_TRUE(with_tail) << line;
      EXPECT_EQ(next_index[tag], kLines) << "tail before the last line: " << line;
      tail_seen[tag] = true;
      continue;
    }
    EXPECT_EQ(m[2], kind) << "line on the wrong stream: " << line;
    EXPECT_FALSE(tail_seen[tag]) << "line after the unfinished last line: " << line;
    EXPECT_EQ(std::stoi(m[4]), next_index[tag]) << "lost or reordered line: " << line;
    next_index[tag] = std::stoi(m[4]) + 1;
  }
  for (int r = 0; r < nproc; ++r) {
    EXPECT_EQ(next_index[r], kLines) << kind << " lines of rank " << r;
    EXPECT_EQ(tail_seen[r], with_tail) << "tail of rank " << r;
  }
}

TEST(KolorunOutput, TaggedLinesCarryTheirRankAndNoneAreLost) {
  const int nproc = 4;
  ProcessResult result =
      run_kolorun({"--tag-output", "-n", std::to_string(nproc), probe_path("KOLO_PROBE_OUTPUT"), std::to_string(kLines)});
  ASSERT_EQ(result.exit_code(), 0) << result.err;
  ASSERT_EQ(result.out.back(), '\n') << "the flushed unfinished line must be terminated";
  expect_tagged_stream(result.out, "out", nproc, true);
  expect_tagged_stream(result.err, "err", nproc, false);
}

TEST(KolorunOutput, WithoutTaggingOutputPassesThroughUnchanged) {
  // One rank, so that its half-line writes cannot interleave with another rank's.
  ProcessResult result = run_kolorun({"-n", "1", probe_path("KOLO_PROBE_OUTPUT"), "3"});
  ASSERT_EQ(result.exit_code(), 0) << result.err;
  // The rank writes straight to kolorun's stdout: no tags, the unfinished line stays unfinished.
  EXPECT_EQ(result.out, "out 0 0\nout 0 1\nout 0 2\ntail 0");
  EXPECT_EQ(result.err, "err 0 0\nerr 0 1\nerr 0 2\n");
}

}  // namespace
}  // namespace kolo::launcher::testing
