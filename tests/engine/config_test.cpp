// Every tunable in the code's table is documented in docs/ENVIRONMENT.md, and values parse as
// documented (suffixes, defaults, errors).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <fstream>
#include <sstream>

#include "common/config.hpp"
#include "kolo/error.hpp"

TEST(Config, EveryTunableIsDocumented) {
  std::ifstream f(std::string(KOLO_SOURCE_ROOT) + "/docs/ENVIRONMENT.md");
  ASSERT_TRUE(f.good()) << "docs/ENVIRONMENT.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  for (const auto& t : kolo::config::tunables())
    EXPECT_NE(ss.str().find(std::string("`") + t.name + "`"), std::string::npos) << t.name << " is not in docs/ENVIRONMENT.md";
}

// The rows of docs/ENVIRONMENT.md's tables that name a KOLO_ variable, as name -> default.
std::map<std::string, std::string> documented_tunables(const std::string& md) {
  std::map<std::string, std::string> rows;
  std::istringstream lines(md);
  std::string line;
  const std::regex row(R"(^\| `(KOLO_[A-Z0-9_]+)` \| ([^|]*) \|)");
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_search(line, m, row)) rows[m[1]] = m[2];
  return rows;
}

std::string read_source(const std::string& relative) {
  std::ifstream f(std::string(KOLO_SOURCE_ROOT) + "/" + relative);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Config, DocumentedDefaultsEqualTheTable) {
  const auto rows = documented_tunables(read_source("docs/ENVIRONMENT.md"));
  for (const auto& t : kolo::config::tunables()) {
    auto it = rows.find(t.name);
    ASSERT_NE(it, rows.end()) << t.name;
    const std::string want = *t.default_value ? std::string("`") + t.default_value + "`" : "(empty)";
    EXPECT_EQ(it->second, want) << t.name << ": docs/ENVIRONMENT.md and common/config.cpp disagree";
  }
}

// Every KOLO_ variable libkolo reads (common/, src/, transports/, kernels/) goes through the table: no
// getenv("KOLO_...") outside common/config.cpp, and every KOLO_ name the code mentions in a
// config call is a row. Programs (tools/: kolorun, kolo-store; kolo-perf) document theirs in their own
// sections of ENVIRONMENT.md.
TEST(Config, LibraryReadsKoloVariablesOnlyThroughTheTable) {
  namespace fs = std::filesystem;
  const std::regex direct(R"(getenv\(\s*"KOLO_)");
  const std::regex through(R"(config::get_(?:string|int)\(\s*"(KOLO_[A-Z0-9_]+)\"|config::is_set\(\s*"(KOLO_[A-Z0-9_]+)\")");
  std::set<std::string> names;
  for (const auto& t : kolo::config::tunables()) names.insert(t.name);
  int files = 0;
  for (const char* dir : {"common", "src", "transports", "kernels"}) {
    for (const auto& e : fs::recursive_directory_iterator(std::string(KOLO_SOURCE_ROOT) + "/" + dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      const std::string text = read_source(fs::relative(e.path(), KOLO_SOURCE_ROOT).string());
      ++files;
      if (e.path().filename() != "config.cpp")
        EXPECT_FALSE(std::regex_search(text, direct)) << e.path() << " reads a KOLO_ variable around the table";
      for (auto it = std::sregex_iterator(text.begin(), text.end(), through); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
        EXPECT_TRUE(names.count(name)) << e.path() << " reads " << name << ", which is not in the table";
      }
    }
  }
  EXPECT_GT(files, 50);
}

TEST(Config, ParsesSuffixesAndDefaults) {
  unsetenv("KOLO_CHUNK_BYTES");
  EXPECT_EQ(kolo::config::get_int("KOLO_CHUNK_BYTES"), 524288);
  setenv("KOLO_CHUNK_BYTES", "2M", 1);
  EXPECT_EQ(kolo::config::get_int("KOLO_CHUNK_BYTES"), 2 << 20);
  setenv("KOLO_CHUNK_BYTES", "64K", 1);
  EXPECT_EQ(kolo::config::get_int("KOLO_CHUNK_BYTES"), 64 << 10);
  setenv("KOLO_CHUNK_BYTES", "lots", 1);
  EXPECT_THROW(kolo::config::get_int("KOLO_CHUNK_BYTES"), kolo::InvalidArgument);
  unsetenv("KOLO_CHUNK_BYTES");
  EXPECT_THROW(kolo::config::get_string("KOLO_NOT_A_KNOB"), std::logic_error);
}
