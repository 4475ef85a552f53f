// Choosing the kernel implementation: the CPU check, KOLO_KERNELS, explicit selection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"
#include "tests/kernels/kernel_test_support.hpp"

namespace kolo::test {
namespace {

using kernels::detail::kernel_path_from_env;

// Sets KOLO_KERNELS for one test and restores the previous value (or its absence) after.
class ScopedKernelsEnv {
 public:
  explicit ScopedKernelsEnv(const char* value) {
    if (const char* old = std::getenv("KOLO_KERNELS")) saved_ = old;
    if (value) {
      setenv("KOLO_KERNELS", value, 1);
    } else {
      unsetenv("KOLO_KERNELS");
    }
  }
  ~ScopedKernelsEnv() {
    if (saved_) {
      setenv("KOLO_KERNELS", saved_->c_str(), 1);
    } else {
      unsetenv("KOLO_KERNELS");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(KernelDispatch, EnvironmentVariableIsParsed) {
  {
    ScopedKernelsEnv env(nullptr);
    EXPECT_EQ(kernel_path_from_env(), KernelPath::automatic);
  }
  {
    ScopedKernelsEnv env("portable");
    EXPECT_EQ(kernel_path_from_env(), KernelPath::portable);
  }
  {
    ScopedKernelsEnv env("avx512");
    EXPECT_EQ(kernel_path_from_env(), KernelPath::avx512);
  }
  {
    ScopedKernelsEnv env("auto");
    EXPECT_EQ(kernel_path_from_env(), KernelPath::automatic);
  }
  {
    ScopedKernelsEnv env("sse9");
    EXPECT_THROW(kernel_path_from_env(), InvalidArgument);
  }
}

TEST(KernelDispatch, SelectionSwitchesTheActiveTable) {
  {
    KernelPathScope scope(KernelPath::portable);
    EXPECT_FALSE(kernels::using_avx512());
    EXPECT_STREQ(kernels::detail::active_table().name, "portable");
  }
  if (kernels::detail::cpu_has_avx512()) {
    KernelPathScope scope(KernelPath::avx512);
    EXPECT_TRUE(kernels::using_avx512());
    EXPECT_STREQ(kernels::detail::active_table().name, "avx512");
  } else {
    EXPECT_THROW(kernels::detail::select_kernel_path(KernelPath::avx512), InvalidArgument);
  }
  // Automatic, with KOLO_KERNELS unset: AVX-512 exactly when the CPU has it.
  ScopedKernelsEnv env(nullptr);
  kernels::detail::select_kernel_path(KernelPath::automatic);
  EXPECT_EQ(kernels::using_avx512(), kernels::detail::cpu_has_avx512());
}

TEST(KernelDispatch, AutomaticChoiceHonoursTheEnvironment) {
  {
    ScopedKernelsEnv env("portable");
    KernelPathScope scope(KernelPath::automatic);
    EXPECT_FALSE(kernels::using_avx512());
  }
  {
    ScopedKernelsEnv env("bogus");
    EXPECT_THROW(kernels::detail::select_kernel_path(KernelPath::automatic), InvalidArgument);
  }
  if (kernels::detail::cpu_has_avx512()) {
    ScopedKernelsEnv env("avx512");
    KernelPathScope scope(KernelPath::automatic);
    EXPECT_TRUE(kernels::using_avx512());
  }
}

TEST(KernelDispatch, CpuCheckMatchesProcCpuinfo) {
  // An independent reading of the CPU flags (Linux only): all four AVX-512 subsets listed.
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string flags;
  char line[8192];
  while (std::fgets(line, sizeof line, f)) {
    if (std::string(line).rfind("flags", 0) == 0) {
      flags = line;
      break;
    }
  }
  std::fclose(f);
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  auto has = [&](const char* flag) { return flags.find(std::string(" ") + flag + " ") != std::string::npos ||
                                            flags.find(std::string(" ") + flag + "\n") != std::string::npos; };
  const bool listed = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
  EXPECT_EQ(kernels::detail::cpu_has_avx512(), listed);
}

}  // namespace
}  // namespace kolo::test
