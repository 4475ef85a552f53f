// Unix-domain SOCK_SEQPACKET connections in the abstract namespace (nothing on disk to clean
// up), for a control channel between two processes of one host: each send is one record, and
// when a process dies the kernel closes its end, so the survivor learns of the death at once.
// Neutral ground for the transports that want one beside their data path (the shm and cuda_ipc
// pairs). Every call names `who` (the transport) in its errors.
#pragma once
#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>

#include "transports/common/fd.hpp"

namespace kolo::transport::seqpacket {

using Clock = std::chrono::steady_clock;

// Listens on the abstract name; an invalid Fd if the name is taken.
Fd listen_abstract(const char* who, const std::string& name);
// Connects to a listening abstract name, retrying while the peer's backlog is full.
Fd connect_abstract_until(const char* who, const std::string& name, Clock::time_point deadline);
// Accepts one connection (non-blocking); throws TimeoutError at the deadline.
Fd accept_until(const char* who, int listen_fd, Clock::time_point deadline);
// One record, whole, bounded by the deadline.
void send_record_until(const char* who, int fd, const void* rec, size_t bytes, Clock::time_point deadline);
// Waits for one record; returns its size. Throws Error if the peer closed, TimeoutError at the deadline.
size_t recv_record_until(const char* who, int fd, void* rec, size_t capacity, Clock::time_point deadline);
// The process at the other end, as the kernel saw it connect (in this process's pid namespace);
// -1 if the kernel does not say.
pid_t peer_pid(int fd);

// How a non-blocking read of a control socket that gave no record (`n` <= 0, `err` its errno)
// ends the reading: read on, the peer hung up, nothing more queued, or an error. A peer that
// closed with unread records in its own socket (this side's doorbells) makes the kernel report
// ECONNRESET once, ahead of what the peer sent before closing, which is still queued: its abort
// notice, whose reason this side must report rather than "closed unexpectedly" (seen under load:
// a MismatchError's partner reported a dead peer instead). So the first ECONNRESET reads on
// (`reset_seen` remembers it); end of file, or ECONNRESET again, is the hang-up.
enum class ReadEnd { read_on, hang_up, drained, error };
inline ReadEnd read_end(ssize_t n, int err, bool& reset_seen) {
  if (n < 0 && err == ECONNRESET && !reset_seen) {
    reset_seen = true;
    return ReadEnd::read_on;
  }
  if (n == 0 || err == ECONNRESET) return ReadEnd::hang_up;
  if (err == EINTR) return ReadEnd::read_on;
  if (err == EAGAIN || err == EWOULDBLOCK) return ReadEnd::drained;
  return ReadEnd::error;
}

}  // namespace kolo::transport::seqpacket
