// One TCP connection to one peer: a non-blocking state machine driven by TcpDevice::poll().
// Sends go out in posting order (header + payload with one sendmsg); receives match incoming
// frames in posting order. Payloads land directly in the user's buffer except for small pieces
// that arrive together with headers in the read-ahead buffer.
#pragma once
#include <deque>
#include <memory>
#include <string>

#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

class TcpDevice;

class TcpPair final : public transport::Pair {
 public:
  TcpPair(TcpDevice* dev, int peer, Fd fd);
  ~TcpPair() override;

  void post_send(const void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;
  void post_recv(void* buf, size_t bytes, const transport::Tag& tag, transport::Request* req) override;

  int fd() const { return fd_.get(); }
  int peer() const { return peer_; }

  // Readiness from epoll (edge-triggered): remembered until a read/write meets EAGAIN.
  void mark(bool readable, bool writable, bool hangup);
  // Moves what can move; true if any request completed or failed.
  bool progress();

  // Orderly close support.
  void queue_bye();
  bool bye_received() const { return bye_received_; }
  bool sends_drained() const { return sends_.empty(); }
  // Abort support: fails every pending request, and sends an abort notice if the stream is
  // between frames (otherwise shuts the socket down so the peer sees the connection end).
  void abort(const std::string& reason);
  bool failed() const { return failed_; }
  // After a failure: reads and drops what the peer still sends, so that closing this socket
  // does not reset the connection (a reset can destroy the abort notice this rank sent before
  // the peer reads it). True once the peer has closed its side.
  bool discard_until_eof();
  void set_closing() { closing_ = true; }

 private:
  struct SendOp {
    FrameHeader hdr;
    const char* buf;
    size_t bytes;
    size_t sent;  // counts header bytes then payload bytes
    transport::Request* req;
    std::string owned;  // payload owned by the pair (abort reasons)
  };
  struct RecvOp {
    char* buf;
    size_t bytes;
    transport::Tag tag;
    transport::Request* req;
  };
  enum class ReadState { header, payload, abort_reason, discard };

  bool refuse_if_closed(transport::Request* req) const;  // fails req if the connection is over
  bool pump_write();
  bool pump_read();
  bool start_frame();            // a complete header is in cur_; dispatch it
  bool match_parked();           // a data header waits for a receive
  size_t fill_inbuf();           // returns bytes read (0: EAGAIN or EOF, see eof_)
  bool fail(transport::Failure why, const std::string& detail);  // fails all, reports to the device
  void fail_pending(transport::Failure why, const std::string& detail);
  void handle_hangup();

  TcpDevice* dev_;
  int peer_;
  Fd fd_;
  std::deque<SendOp> sends_;
  std::deque<RecvOp> recvs_;

  // Reader state.
  std::unique_ptr<char[]> inbuf_;
  size_t in_pos_ = 0, in_end_ = 0;
  ReadState rstate_ = ReadState::header;
  FrameHeader cur_{};
  size_t hdr_got_ = 0;
  bool parked_ = false;  // cur_ is a data header with no receive posted yet
  size_t left_ = 0;      // payload bytes still to read for the current frame
  char* dst_ = nullptr;
  std::string abort_reason_;

  bool readable_ = true, writable_ = true, hangup_ = false;
  bool eof_ = false;
  bool bye_received_ = false, closing_ = false, failed_ = false;
  bool in_hangup_ = false;  // handle_hangup() is running: pump_read must not re-enter it
  bool gone_ = false;       // the peer said goodbye and closed: nothing more to do
  bool abort_sent_ = false;
  bool out_broken_ = false;  // a send was cut off mid-frame: no frame may follow
};

}  // namespace kolo::tcp
