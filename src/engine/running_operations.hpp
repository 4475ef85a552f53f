// Whether this thread is running operations (holds some group's run lock): a completion
// callback that waits, or issues, must not try to run operations itself. Shared by the
// executor's files (executor.cpp, executor_direct.cpp).
#pragma once

namespace kolo::engine {

// initial-exec: libkolo is loaded at startup (not dlopen'ed after threads exist, except as
// kolo_torch's dependency, which glibc's static TLS reserve covers for one int), so the variable
// is one %fs-relative access instead of a __tls_get_addr call on every inline run.
inline thread_local int running_operations __attribute__((tls_model("initial-exec"))) = 0;

struct RunningOperations {
  RunningOperations() { ++running_operations; }
  ~RunningOperations() { --running_operations; }
  RunningOperations(const RunningOperations&) = delete;
  RunningOperations& operator=(const RunningOperations&) = delete;
};

}  // namespace kolo::engine
