#include "transports/ibverbs/ib_verbs.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kolo/error.hpp"
#include "transports/common/setup_text.hpp"

namespace kolo::ib {

std::string verbs_error(const char* call, int err) {
  if (err == 0) err = EIO;  // some providers fail without setting errno
  return std::string(call) + ": " + transport::errno_text(err);
}

void throw_verbs_error(const char* call, int err, const std::string& context) {
  throw Error("ibverbs transport: " + verbs_error(call, err) + context);
}

void RegisteredBuffer::Free::operator()(void* p) const { std::free(p); }

RegisteredBuffer::RegisteredBuffer(ibv_pd* pd, size_t bytes, int access, const std::string& what) : bytes_(bytes) {
  void* p = nullptr;
  if (int rc = ::posix_memalign(&p, 4096, bytes); rc != 0)
    throw Error("ibverbs transport: cannot allocate " + std::to_string(bytes) + " bytes for " + what + ": " + transport::errno_text(rc));
  mem_.reset(p);
  // No memset: registration faults the pages in, and no slot is read before its write arrived.
  errno = 0;
  mr_.reset(ibv_reg_mr(pd, p, bytes, access));
  if (!mr_)
    throw_verbs_error("ibv_reg_mr", errno,
                      " (registering " + std::to_string(bytes) + " bytes for " + what +
                          "; is the locked-memory limit, ulimit -l, too low?)");
}

}  // namespace kolo::ib
