// kolo's errors as torch users see them. c10d's own backends say "Timed out" when an operation
// or a wait runs past its timeout, and code matches on that text (torch's elastic agent, users'
// retry loops); kolo says "timed out" in its own words. A kolo::TimeoutError surfacing through
// kolo_torch (Work.wait(), the future, a blocking call) is rethrown with its text prefixed
// "Timed out: ", keeping its type (RuntimeError in Python) and the rank it blames.
#pragma once
#include <exception>

namespace kolo_torch {

// `e` unchanged unless it holds a kolo::TimeoutError; then one whose text starts "Timed out: ".
// Null stays null. Idempotent (an already prefixed error is not prefixed again).
std::exception_ptr for_torch(std::exception_ptr e);

// Runs fn(); a kolo::TimeoutError it throws leaves as for_torch() makes it.
template <typename F>
auto with_torch_errors(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    std::rethrow_exception(for_torch(std::current_exception()));
  }
}

}  // namespace kolo_torch
