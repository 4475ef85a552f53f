// nccl-tests' -J document (its src/util.cu, JSON_FILE_VERSION 3), so the analysis tools written
// for nccl-tests read kolo's runs: the same keys, nesting and value kinds, including its quirks
// (booleans written as the strings "true"/"false", the root as a "%6i" string, NaN as "nan").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "report.hpp"

namespace kolo::bench {

// Creates `path` exclusively, or path.0, path.1, ... when it exists, as nccl-tests does, so a
// rerun never overwrites a result. Returns the path created ("" when none could be) and sets
// `line` to what nccl-tests prints: "# Writing JSON output to P" or "# skipping json output; ...".
// A path not ending in ".json" is skipped silently, as nccl-tests skips it (line left empty).
std::string claim_json_path(const std::string& path, std::string& line);

// "YYYY-MM-DD HH:MM:SS", local time, as nccl-tests stamps start_time and end_time.
std::string now_text();

struct NcclJsonRun {
  const CommonOptions* options = nullptr;
  std::string start_time;
  std::vector<RankDescription> ranks;
  std::string device_info;              // "cpu kolo ..." for every rank's "device_info"
  const std::vector<Measurement>* rows = nullptr;  // out-of-place then in-place, row by row
  int64_t total_wrong = 0;
  double average_busbw = 0;
  double min_bw = 0;                    // 0: unchecked
  std::vector<std::string> errors;      // "errors": why the run stopped early, if it did
};

// Writes the whole document to `path` (already claimed). Throws std::runtime_error on failure.
void write_nccl_json(const std::string& path, const NcclJsonRun& run);

}  // namespace kolo::bench
