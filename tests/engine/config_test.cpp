// Every tunable in the code's table is documented in docs/ENVIRONMENT.md, and values parse as
// documented (suffixes, defaults, errors).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/config.hpp"
#include "kolo/error.hpp"

TEST(Config, EveryTunableIsDocumented) {
  std::ifstream f(std::string(KOLO_SOURCE_ROOT) + "/docs/ENVIRONMENT.md");
  ASSERT_TRUE(f.good()) << "docs/ENVIRONMENT.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  for (const auto& t : kolo::config::tunables())
    EXPECT_NE(ss.str().find(std::string("`") + t.name + "`"), std::string::npos) << t.name << " is not in docs/ENVIRONMENT.md";
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
