#include "transports/common/fd.hpp"

#include <unistd.h>

namespace kolo::transport {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() { reset(); }

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace kolo::transport
