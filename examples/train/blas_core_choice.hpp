// Which OpenBLAS kernels kolo-train runs on, chosen on purpose. OpenBLAS picks its kernel family
// when the library loads: from OPENBLAS_CORETYPE if that is set, else by detecting the CPU. Some
// environments export OPENBLAS_CORETYPE=Haswell, which on AVX-512 machines roughly halves the
// speed of every matmul. Since the choice is made before main() runs, changing it means
// re-executing the program once with the environment fixed.
#pragma once

#include <string>

namespace kolo::train {

// choice: "auto" (let OpenBLAS detect the CPU: drop OPENBLAS_CORETYPE), "env" (keep the
// environment as it is) or a core name OpenBLAS knows ("SkylakeX", "Haswell", ...). Returns
// only if the running process already has what was asked for; otherwise re-executes itself with
// the same arguments (at most once) and does not return.
void apply_blas_core_choice(const std::string& choice, char** argv);

}  // namespace kolo::train
