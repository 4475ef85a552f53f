#include "transports/pair_base.hpp"

namespace kolo::transport {

bool PairBase::refuse(Request* req) const {
  if (!failed_ && !gone_ && !hung_up_) return false;
  req->fail(failed_ ? Failure::aborted : Failure::peer_closed,
            "connection to " + who() + (failed_ ? " already failed" : " was closed by the peer"));
  return true;
}

void PairBase::post_send(const void* buf, size_t bytes, const Tag& tag, Request* req) {
  req->start(peer_, true, tag, bytes);
  if (refuse(req)) return;
  sends_.push_back(SendOp{static_cast<const char*>(buf), bytes, 0, tag, req, 0});
  on_send_posted();
}

void PairBase::post_recv(void* buf, size_t bytes, const Tag& tag, Request* req) {
  peek_wanted_ = false;
  req->start(peer_, false, tag, bytes);
  if (refuse(req)) return;
  recvs_.push_back(RecvOp{static_cast<char*>(buf), bytes, 0, tag, req});
  on_recv_posted();
}

bool PairBase::peek_incoming(Tag* tag, uint64_t* bytes) {
  // A posted receive owns the next message: it is nobody else's to look at.
  if (failed_ || gone_ || !recvs_.empty()) return false;
  if (peek_header(tag, bytes)) return true;
  peek_wanted_ = true;
  return false;
}

bool PairBase::match_first_recv(const Tag& got, uint64_t got_bytes) {
  RecvOp& op = recvs_.front();
  if (got == op.tag && got_bytes == op.bytes) return true;
  Request* req = op.req;
  req->got_tag = got;
  req->got_bytes = got_bytes;
  const Failure why = got == op.tag ? Failure::size_mismatch : Failure::tag_mismatch;
  recvs_.pop_front();
  req->fail(why, "message from " + who() + " does not match the receive");
  fail(why, req->detail);
  return false;
}

void PairBase::complete_first_send() {
  if (Request* r = sends_.front().req) complete(r);
  sends_.pop_front();
}

void PairBase::complete_first_recv() {
  complete(recvs_.front().req);
  recvs_.pop_front();
}

void PairBase::fail_pending(Failure why, const std::string& detail) {
  fail_held(why, detail);
  for (size_t i = 0; i < sends_.size(); ++i)
    if (Request* r = sends_[i].req; r && r->state == Request::State::pending) r->fail(why, detail);
  for (size_t i = 0; i < recvs_.size(); ++i)
    if (Request* r = recvs_[i].req; r->state == Request::State::pending) r->fail(why, detail);
  sends_.clear();
  recvs_.clear();
}

bool PairBase::fail(Failure why, const std::string& detail) {
  if (failed_) return true;
  failed_ = true;
  failure_ = why;
  on_fail();
  fail_pending(why, detail);
  if (sink_) sink_->peer_failed(peer_, why, detail);
  return true;
}

void PairBase::abort(const std::string& reason) {
  // Even a pair that already failed (say, on a mismatched message) sends the notice: its peer
  // is probably alive and should learn why.
  fail_pending(Failure::aborted, reason);
  if (!failed_) failure_ = Failure::aborted;
  failed_ = true;
  if (!abort_sent_ && !gone_ && !peer_failed_us_) {
    abort_sent_ = true;
    send_abort_notice(reason);
  }
  after_abort();
}

void PairBase::rearm(int peer, FailureSink* sink) {
  sends_.clear();
  recvs_.clear();
  failure_ = Failure::none;
  failed_ = closing_ = bye_received_ = gone_ = hung_up_ = peer_failed_us_ = abort_sent_ = peek_wanted_ = false;
  peer_ = peer;
  sink_ = sink;
}

}  // namespace kolo::transport
