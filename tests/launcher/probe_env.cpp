// Test helper launched by kolorun: prints its whole environment ("ENV NAME=VALUE"), its
// arguments ("ARG i=VALUE"), the CPUs it may run on ("CPUS=0,1") and the first line of its stdin
// ("STDIN=..."), so a test can check what each rank was given.
#include <sched.h>

#include <cstdio>
#include <iostream>
#include <string>

extern char** environ;

int main(int argc, char** argv) {
  for (char** entry = environ; *entry != nullptr; ++entry) std::printf("ENV %s\n", *entry);
  for (int i = 1; i < argc; ++i) std::printf("ARG %d=%s\n", i, argv[i]);
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  std::printf("CPUS=%s\n", cpus.c_str());
  std::string line;
  std::getline(std::cin, line);  // kolorun gives ranks /dev/null or a pipe, never a terminal
  std::printf("STDIN=%s\n", line.c_str());
  return 0;
}
