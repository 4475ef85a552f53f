#include "check_log.hpp"

#include <cstdio>

namespace kolo::coltest {

namespace {
constexpr size_t kPrintedPerCase = 4;
}

void CheckLog::begin_case(std::string description) {
  case_ = std::move(description);
  printed_in_case_ = 0;
  ++cases_;
}

void CheckLog::report_element(const char* what, size_t index, long double got, long double want) {
  ++failures_;
  if (printed_in_case_++ >= kPrintedPerCase) return;
  std::fprintf(stderr, "FAIL rank %d [%s] %s[%zu] = %s, expected %s\n", rank_, case_.c_str(), what, index,
               value_text(got).c_str(), value_text(want).c_str());
}

void CheckLog::expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures_;
  if (printed_in_case_++ >= kPrintedPerCase) return;
  std::fprintf(stderr, "FAIL rank %d [%s] %s\n", rank_, case_.c_str(), what.c_str());
}

}  // namespace kolo::coltest
