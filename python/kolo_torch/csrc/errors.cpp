#include "errors.hpp"

#include <string>

#include "kolo/error.hpp"

namespace kolo_torch {

namespace {
constexpr const char* kPrefix = "Timed out: ";
}

std::exception_ptr for_torch(std::exception_ptr e) {
  if (!e) return e;
  try {
    std::rethrow_exception(e);
  } catch (const kolo::TimeoutError& t) {
    const std::string what = t.what();
    if (what.rfind(kPrefix, 0) == 0) return e;
    return std::make_exception_ptr(kolo::TimeoutError(kPrefix + what, t.peer_rank()));
  } catch (...) {
    return e;
  }
}

}  // namespace kolo_torch
