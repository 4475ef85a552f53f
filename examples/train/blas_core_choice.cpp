#include "blas_core_choice.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kolo::train {

void apply_blas_core_choice(const std::string& choice, char** argv) {
  if (choice == "env") return;
  // Guards against a loop should the environment not stick (it always should).
  static const char* kGuard = "KOLO_TRAIN_BLAS_CORE_APPLIED";
  if (std::getenv(kGuard)) return;
  const char* current = std::getenv("OPENBLAS_CORETYPE");
  const bool want_unset = choice == "auto";
  if (want_unset ? (current == nullptr || *current == '\0') : (current && choice == current)) return;
  if (want_unset)
    unsetenv("OPENBLAS_CORETYPE");
  else
    setenv("OPENBLAS_CORETYPE", choice.c_str(), 1);
  setenv(kGuard, "1", 1);
  execv("/proc/self/exe", argv);
  // Could not re-execute (no /proc?): go on with the kernels already loaded, and say so.
  std::fprintf(stderr, "kolo-train: could not re-execute to apply --blas-core %s (%s); OpenBLAS keeps OPENBLAS_CORETYPE=%s\n",
               choice.c_str(), std::strerror(errno), current ? current : "");
}

}  // namespace kolo::train
