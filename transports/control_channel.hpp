// A control channel: what a transport needs beside its data path when that path cannot say it
// by itself. RDMA queue pairs cannot: they carry no secret-checking handshake, no abort notice
// and no goodbye, and a dead peer's queue pair shows up only as retries exceeded on the next
// write. A control channel keeps one connection per peer for exactly that: the handshake at
// connect time, abort notices, goodbyes, and the prompt news of a peer's death (reported to the
// Bootstrap's FailureSink, like any device's failures).
//
// TCP carries it (connect_control_channel, in transports/tcp/tcp_control.cpp), so a transport using a
// control channel sees only this interface and never another transport's headers.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.hpp"

namespace kolo::transport {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Reads notices and hang-ups, flushes goodbyes; true if anything changed.
  virtual bool poll() = 0;
  // Readable when poll() may have work (for the owner's epoll set).
  virtual int wait_fd() const = 0;
  // Tells every peer this process aborts, with `reason` (best effort, bounded).
  virtual void abort(const std::string& reason) = 0;

  // Orderly close, per peer: the owner says goodbye once its own data to `peer` has landed,
  // since the peer takes a goodbye to mean that no more data will come.
  virtual void send_goodbye(int peer) = 0;
  virtual bool goodbye_flushed(int peer) const = 0;   // our goodbye left this process
  virtual bool goodbye_received(int peer) const = 0;  // the peer's goodbye arrived
  virtual bool failed(int peer) const = 0;            // the connection to `peer` broke or aborted
  // Closes the connection to `peer` both ways (after the goodbyes, or at the close deadline).
  virtual void hang_up(int peer) = 0;
};

// Connects a control channel to `peers` (each of them calls it with this rank among its peers),
// under b.prefix; failures go to b.failures. TCP's, which every host has and which reports a dead
// peer the moment its socket closes: defined in transports/tcp/tcp_control.cpp.
std::unique_ptr<ControlChannel> connect_control_channel(const Bootstrap& b, const std::vector<int>& peers);

}  // namespace kolo::transport
