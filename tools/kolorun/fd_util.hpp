// Small POSIX file-descriptor helpers shared by the launcher's parts.
#pragma once
#include <string>
#include <string_view>

namespace kolo::launcher {

// Owns one file descriptor and closes it exactly once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A pipe whose both ends are close-on-exec, so no child inherits an end it was not given.
struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};
Pipe make_pipe();  // throws kolo::Error

void set_nonblocking(int fd);  // throws kolo::Error

// Writes all of data, retrying short writes and EINTR, and waiting (in bounded slices) while a
// non-blocking destination is full. Returns false when the destination is gone (EPIPE, EBADF...).
bool write_all(int fd, std::string_view data);

// "what: strerror(err)" for exception messages.
std::string system_error_text(std::string_view what, int err);

}  // namespace kolo::launcher
