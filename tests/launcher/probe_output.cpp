// Test helper launched by kolorun: writes numbered lines to stdout and stderr, deliberately
// splitting each line over two write() calls and ending stdout with an unfinished line, so a
// test can check that tagging reassembles lines and loses nothing.
//   probe_output LINES
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

void write_in_two_parts(int fd, const std::string& text) {
  size_t half = text.size() / 2;
  if (::write(fd, text.data(), half) != static_cast<ssize_t>(half)) std::exit(10);
  ::usleep(100);  // give kolorun a chance to read the first half on its own
  if (::write(fd, text.data() + half, text.size() - half) != static_cast<ssize_t>(text.size() - half))
    std::exit(10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int lines = std::atoi(argv[1]);
  const char* rank_text = std::getenv("RANK");
  const std::string rank = rank_text != nullptr ? rank_text : "?";
  for (int i = 0; i < lines; ++i) {
    write_in_two_parts(STDOUT_FILENO, "out " + rank + " " + std::to_string(i) + "\n");
    write_in_two_parts(STDERR_FILENO, "err " + rank + " " + std::to_string(i) + "\n");
  }
  write_in_two_parts(STDOUT_FILENO, "tail " + rank);  // no newline: kolorun must flush it at exit
  return 0;
}
