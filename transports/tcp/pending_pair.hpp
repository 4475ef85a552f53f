// What a lazy TCP device (KOLO_CONNECT=lazy) hands out for a peer it has no connection to yet.
// Its first post asks the device to connect (on_demand.hpp); posts wait here, in posting order,
// until the connection is made and then go to the real TcpPair in that order, so the Pair
// contract (messages match in posting order per direction) holds across the switch. Posts made
// after that are passed straight on; the device's pair() returns the TcpPair itself by then, so
// the data path does not pass through here.
#pragma once
#include <deque>
#include <string>

#include "transports/transport.hpp"

namespace kolo::tcp {

class OnDemand;

class PendingPair final : public transport::Pair {
 public:
  PendingPair(OnDemand* owner, int peer) : owner_(owner), peer_(peer) {}

  void post_send(const void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;
  void post_recv(void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;
  // Nothing can have arrived without a connection; once connected, the real pair answers.
  bool peek_incoming(transport::Tag* tag, uint64_t* bytes) override { return real_ && real_->peek_incoming(tag, bytes); }

  // The connection is made: posts what waited, in order, and passes later posts on.
  void flush_into(transport::Pair* real);
  // The connection cannot be made (or the device aborted): fails what waited with `why`, and
  // every later post as a failed TcpPair does ("connection to rank N already failed").
  void fail_all(transport::Failure why, const std::string& detail);
  bool has_waiting() const { return !ops_.empty(); }

 private:
  struct Op {
    bool send;
    char* buf;
    size_t bytes;
    transport::Tag tag;
    transport::Request* req;
  };
  void queue(Op op);

  OnDemand* owner_;
  int peer_;
  transport::Pair* real_ = nullptr;
  std::deque<Op> ops_;
  bool failed_ = false;
};

}  // namespace kolo::tcp
