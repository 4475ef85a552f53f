// Worker side: counts failed checks and prints the first few of each case to stderr with
// enough context (case, rank, index, value, expected) to debug from a CI log.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/types.hpp"
#include "reference.hpp"

namespace kolo::coltest {

class CheckLog {
 public:
  explicit CheckLog(int rank) : rank_(rank) {}

  // Starts a new case; failures print this description.
  void begin_case(std::string description);
  void end_case() { case_.clear(); }
  // Compares `count` elements of `base` (type t) with expected(i); returns the number wrong.
  template <class Expected>
  size_t expect_elements(const char* what, DataType t, const void* base, size_t count, Expected expected);
  // Records a failure unless `ok`.
  void expect(bool ok, const std::string& what);

  size_t failures() const { return failures_; }
  size_t cases() const { return cases_; }
  int rank() const { return rank_; }
  const std::string& current_case() const { return case_; }

 private:
  void report_element(const char* what, size_t index, long double got, long double want);

  int rank_;
  std::string case_;
  size_t failures_ = 0;
  size_t printed_in_case_ = 0;
  size_t cases_ = 0;
};

template <class Expected>
size_t CheckLog::expect_elements(const char* what, DataType t, const void* base, size_t count,
                                  Expected expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const long double got = load_element(t, base, i);
    const long double want = expected(i);
    if (got == want) continue;
    ++wrong;
    report_element(what, i, got, want);
  }
  return wrong;
}

}  // namespace kolo::coltest
