// An owned file descriptor: closed when it goes out of scope. Neutral ground for every transport
// and for the engine (its wake-up eventfd), so that none of them includes another's headers.
#pragma once

namespace kolo::transport {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

}  // namespace kolo::transport
