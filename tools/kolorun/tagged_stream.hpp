// One rank's stdout or stderr, read from a pipe and copied to kolorun's own stdout or stderr
// with "[rank]: " in front of every line. Whole lines are written with one write() each batch,
// so lines of different ranks never mix even though they share one terminal.
#pragma once
#include <string>
#include <string_view>

#include "kolorun/fd_util.hpp"

namespace kolo::launcher {

class TaggedStream {
 public:
  // A line longer than this is cut and written in tagged pieces, so a rank printing without
  // newlines cannot make kolorun buffer without bound.
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  TaggedStream(UniqueFd source, int rank, int destination);

  int fd() const { return source_.get(); }
  bool open() const { return source_.valid(); }

  // Reads what the pipe holds now (non-blocking) and writes out every complete line. At end of
  // file writes the unfinished last line (with a newline added) and closes the pipe.
  void on_readable();

  // Writes any unfinished line and closes the pipe: used when a rank's descendants keep the
  // pipe open after the rank itself is gone.
  void finish();

 private:
  void emit_complete_lines();
  void emit(std::string_view text);

  UniqueFd source_;
  std::string prefix_;
  int destination_;
  bool destination_broken_ = false;  // after EPIPE: keep draining the rank, stop writing
  std::string pending_;              // bytes after the last newline seen
};

}  // namespace kolo::launcher
