// Unix-domain SOCK_SEQPACKET connections in the abstract namespace (nothing on disk to clean
// up), for a control channel between two processes of one host: each send is one record, and
// when a process dies the kernel closes its end, so the survivor learns of the death at once.
// Neutral ground for the transports that want one beside their data path (cuda_ipc's pair; shm
// has its own copy in shm_socket.cpp, from before this file). Every call names `who` (the
// transport) in its errors.
#pragma once
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

}  // namespace kolo::transport::seqpacket
