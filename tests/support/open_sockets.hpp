// How many sockets this process holds: /proc/self/fd entries that link to "socket:[...]".
// Shared by the tests and the benchmark that count connections per rank (eager vs on demand).
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace kolo::testing_support {

inline int open_sockets() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    char path[300], target[64] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    if (readlink(path, target, sizeof target - 1) > 0 && std::strncmp(target, "socket:", 7) == 0) ++n;
  }
  closedir(d);
  return n;
}

}  // namespace kolo::testing_support
