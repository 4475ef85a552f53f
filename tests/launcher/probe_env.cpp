// Test helper launched by kolorun: prints its whole environment ("ENV NAME=VALUE"), its
// arguments ("ARG i=VALUE") and the first line of its stdin ("STDIN=..."), so a test can check
// what each rank was given.
#include <cstdio>
#include <iostream>
#include <string>

extern char** environ;

int main(int argc, char** argv) {
  for (char** entry = environ; *entry != nullptr; ++entry) std::printf("ENV %s\n", *entry);
  for (int i = 1; i < argc; ++i) std::printf("ARG %d=%s\n", i, argv[i]);
  std::string line;
  std::getline(std::cin, line);  // kolorun gives ranks /dev/null or a pipe, never a terminal
  std::printf("STDIN=%s\n", line.c_str());
  return 0;
}
