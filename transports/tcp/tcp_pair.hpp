// One TCP connection to one peer: a non-blocking state machine driven by TcpDevice::poll().
// Sends go out in posting order (header + payload with one sendmsg); receives match incoming
// frames in posting order. Payloads land directly in the user's buffer except for small pieces
// that arrive together with headers in the read-ahead buffer.
#pragma once
#include <memory>
#include <string>

#include "transports/pair_base.hpp"
#include "transports/tcp/socket.hpp"
#include "common/tls.hpp"
#include "transports/tcp/wire.hpp"

namespace kolo::tcp {

class TcpPair final : public transport::PairBase {
 public:
  // With `tls` (KOLO_TLS=1), frames travel in its records; its handshake may still be under way
  // (lazy connections), and is then finished by this pair's first reads and writes.
  TcpPair(transport::FailureSink* sink, int peer, Fd fd, std::unique_ptr<TlsSession> tls = nullptr);
  ~TcpPair() override;

  int fd() const { return fd_.get(); }

  // Readiness from epoll (edge-triggered): remembered until a read/write meets EAGAIN.
  void mark(bool readable, bool writable, bool hangup);
  // Moves what can move; true if any request completed or failed.
  bool progress();
  // A receive is posted, or a frame is half read: bytes are awaited on this socket.
  bool awaits_input() const { return !recvs_.empty() || rstate_ != ReadState::header || hdr_got_ > 0; }
  // Read at the next progress() without waiting for epoll to say so (a read that finds nothing
  // clears it again, as after an event).
  void expect_input() { readable_ = true; }
  // A send waits for the socket buffer to drain, which only epoll reports.
  bool output_blocked() const { return !writable_ && !sends_.empty(); }

  // Hand-over (TcpDevice::hand_over). reusable(): after the abort, the connection still
  // carries whole frames both ways (no frame of ours cut off, the notice out whole or not owed,
  // no hang-up; not with TLS, whose records are not resynchronised). begin_resync() queues our
  // marker `mine` and turns a message half read into bytes to drop; resync_step() writes what it
  // can of the marker and reads, dropping everything, until the peer's marker, which must carry
  // `expect` (true once both are done; throws Error when the peer closes or sends garbage);
  // finish_resync() makes the pair a healthy one of the new group. Bytes the peer sent after its
  // marker stay in the read-ahead buffer: they are the new group's.
  bool reusable() const;
  void begin_resync(const transport::Tag& mine, const transport::Tag& expect);
  bool resync_step();
  bool resync_writing() const { return marker_sent_ < sizeof(FrameHeader); }
  void finish_resync(int peer, transport::FailureSink* sink);
  // Closes this side for writing, once (the destructor's linger: see TcpDevice::~TcpDevice).
  void shut_write();
  // The destructor's linger after a failure: reads and drops what the peer still sends; true
  // once the peer will send nothing more (its end of stream, or its abort notice where this
  // side can still follow the frames: a peer that aborted stops sending, so closing then
  // cannot reset a connection whose last bytes, our notice, it has not read).
  bool linger_done();

  // Orderly close support.
  void queue_bye();
  bool sends_drained() const { return sends_.empty(); }
  // After a failure: reads and drops what the peer still sends, so that closing this socket
  // does not reset the connection (a reset can destroy the abort notice this rank sent before
  // the peer reads it). True once the peer has closed its side.
  bool discard_until_eof();

 private:
  // A send's `done` counts header bytes, then payload bytes; its `kind` is a FrameKind (0: data).
  enum class ReadState { header, payload, abort_reason, discard };

  void on_send_posted() override;
  void on_recv_posted() override;
  // A data header read off the socket waits in cur_ (parked_) until a receive is posted:
  // pump_read reads headers whether or not a receive waits.
  bool peek_header(transport::Tag* tag, uint64_t* bytes) const override;
  void fail_held(transport::Failure why, const std::string& detail) override;
  // Sent only between frames; a frame cut off halfway leaves the stream unusable, and the
  // shutdown in after_abort() is then all the peer sees.
  void send_abort_notice(const std::string& reason) override;
  void after_abort() override;

  bool pump_write();
  bool pump_read();
  bool start_frame();            // a complete header is in cur_; dispatch it
  bool match_parked();           // a data header waits for a receive
  size_t fill_inbuf();           // returns bytes read (0: EAGAIN or EOF, see eof_)
  void handle_hangup();
  // The TLS branch of the send and receive calls (tls_send_/tls_recv_: user-space records).
  ssize_t tls_sendv(iovec* iov, int n);
  ssize_t tls_recv(void* buf, size_t len);
  void tls_ready(bool from_read);
  // An abort notice that waits for the TLS handshake (see send_abort_notice): advances the
  // handshake; true once the notice went (or cannot go) and the write side is shut.
  bool finish_abort_notice();
  std::string io_error(int err) const;

  Fd fd_;
  // Null without TLS. The data path tests one flag per system call: without TLS, or with kTLS
  // for that direction, it is false and the plain sendmsg/recv run.
  std::unique_ptr<TlsSession> tls_;
  bool tls_send_ = false, tls_recv_ = false;
  std::string notice_after_handshake_;

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
  bool in_hangup_ = false;  // handle_hangup() is running: pump_read must not re-enter it
  bool out_broken_ = false;  // a send was cut off mid-frame: no frame may follow
  bool shut_wr_ = false;     // this side is closed for writing
  bool notice_whole_ = false;  // the abort notice went out whole

  // Hand-over state (begin_resync).
  FrameHeader marker_{};
  size_t marker_sent_ = sizeof(FrameHeader);
  transport::Tag expect_;
  bool marker_got_ = false;
  size_t resync_recv();  // reads into the read-ahead buffer; throws on end of stream
  void drop_partial_frame();  // the reader's message in progress becomes bytes to drop
  // Reads and drops whole frames until a header of `kind` (left in cur_): true; false when
  // nothing more is there now. Throws on end of stream or a corrupt frame.
  bool drop_until(FrameKind kind);
};

}  // namespace kolo::tcp
