#include "transports/tcp/pending_pair.hpp"

#include "transports/tcp/on_demand.hpp"

namespace kolo::tcp {

using transport::Request;
using transport::Tag;

void PendingPair::post_send(const void* buf, size_t bytes, const Tag& tag, Request* req) {
  if (real_) return real_->post_send(buf, bytes, tag, req);
  req->start(peer_, true, tag, bytes);
  queue(Op{true, const_cast<char*>(static_cast<const char*>(buf)), bytes, tag, req});
}

void PendingPair::post_recv(void* buf, size_t bytes, const Tag& tag, Request* req) {
  if (real_) return real_->post_recv(buf, bytes, tag, req);
  req->start(peer_, false, tag, bytes);
  queue(Op{false, static_cast<char*>(buf), bytes, tag, req});
}

void PendingPair::queue(Op op) {
  if (failed_) {
    // As a failed TcpPair refuses a post (transports/pair_base.cpp).
    op.req->fail(transport::Failure::aborted, "connection to rank " + std::to_string(peer_) + " already failed");
    return;
  }
  const bool send = op.send;
  ops_.push_back(op);
  // After the push: a connect that fails at once (a dead peer) fails this request too.
  owner_->want(peer_, send);
}

void PendingPair::flush_into(transport::Pair* real) {
  real_ = real;
  while (!ops_.empty()) {
    Op op = ops_.front();
    ops_.pop_front();
    if (op.send)
      real->post_send(op.buf, op.bytes, op.tag, op.req);
    else
      real->post_recv(op.buf, op.bytes, op.tag, op.req);
  }
}

void PendingPair::fail_all(transport::Failure why, const std::string& detail) {
  failed_ = true;
  for (auto& op : ops_)
    if (op.req->state == Request::State::pending) op.req->fail(why, detail);
  ops_.clear();
}

}  // namespace kolo::tcp
