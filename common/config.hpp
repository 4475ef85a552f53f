// Every tunable of kolo lives in one table (config.cpp), documented in docs/ENVIRONMENT.md.
// Values come from the environment, else the table's default. Reading a name that is not in the
// table is a programming error (throws), so an undocumented knob cannot creep in.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::config {

struct Tunable {
  const char* name;
  const char* default_value;
  const char* doc;
};

const std::vector<Tunable>& tunables();

std::string get_string(const char* name);
int64_t get_int(const char* name);  // accepts suffixes K, M, G (powers of 1024)
bool is_set(const char* name);      // set in the environment (non-empty)

}  // namespace kolo::config
