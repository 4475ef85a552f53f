// libFuzzer target: the TCP transport's frame reader (TcpPair, after the handshake) fed an
// arbitrary byte stream by its peer, with up to three receives posted.
// Input: byte 0 = number of receives (low 2 bits, at most 3) and whether the peer then closes
// (bit 2); per receive 2 bytes of size (little-endian, < 64 KiB) and 8 bytes of tag; the rest is
// what the peer sends.
// Invariants, beyond no crash, no sanitizer report and no allocation sized by the peer (libFuzzer's
// -malloc_limit_mb): an independent reading of the stream (frames: 40-byte header, data payload,
// bye, abort; anything else ends it) says which receives must complete and with which bytes, and
// which must fail on a mismatched header; the pair agrees exactly. Every failure but a peer's abort notice names the peer.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transports/tcp/tcp_device.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

using namespace kolo;

namespace {

struct Sink : transport::FailureSink {
  void peer_failed(int, transport::Failure, const std::string&) override {}
};

struct Posted {
  std::vector<uint8_t> buf;
  transport::Tag tag;
  transport::Request req;
};

enum class Expect { complete, mismatch, unsettled };

// The oracle: walks the stream frame by frame and matches data frames to receives in order.
std::vector<Expect> expected_outcomes(const uint8_t* s, size_t n, std::vector<Posted>& recvs,
                                      std::vector<std::vector<uint8_t>>* payloads) {
  std::vector<Expect> out(recvs.size(), Expect::unsettled);
  payloads->assign(recvs.size(), {});
  size_t pos = 0;
  size_t next = 0;
  while (next < recvs.size() && n - pos >= sizeof(tcp::FrameHeader)) {
    tcp::FrameHeader h;
    std::memcpy(&h, s + pos, sizeof h);
    pos += sizeof h;
    if (h.kind == tcp::FrameKind::bye) continue;
    if (h.kind != tcp::FrameKind::data) break;  // abort or corrupt: the pair fails
    transport::Tag t;
    std::memcpy(t.w, h.tag, sizeof t.w);
    if (!(t == recvs[next].tag) || h.bytes != recvs[next].buf.size()) {
      out[next] = Expect::mismatch;
      break;
    }
    if (n - pos < h.bytes) break;  // cut short: stays pending (or fails at the hang-up)
    (*payloads)[next].assign(s + pos, s + pos + h.bytes);
    out[next++] = Expect::complete;
    pos += h.bytes;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t nrecv = data[0] & 3;
  const bool close_after = (data[0] & 4) != 0;
  size_t pos = 1;
  std::vector<Posted> recvs(nrecv);
  for (Posted& p : recvs) {
    if (size - pos < 10) return 0;
    p.buf.assign(static_cast<size_t>(data[pos]) | static_cast<size_t>(data[pos + 1]) << 8, 0);
    std::memcpy(&p.tag.w[0], data + pos + 2, 8);
    pos += 10;
  }
  const uint8_t* stream = data + pos;
  const size_t stream_len = size - pos;

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) != 0) std::abort();
  Sink sink;
  {
    auto dev = tcp::TcpDevice::adopt(2, &sink, 0, tcp::Fd(sp[0]));
    for (Posted& p : recvs) dev->pair(0)->post_recv(p.buf.data(), p.buf.size(), p.tag, &p.req);
    // Write the stream as the socket takes it, letting the pair read in between.
    size_t written = 0;
    int idle = 0;
    while (idle < 3) {
      bool moved = false;
      if (written < stream_len) {
        const ssize_t w = ::send(sp[1], stream + written, stream_len - written, MSG_NOSIGNAL);
        if (w > 0) written += static_cast<size_t>(w), moved = true;
        else if (w < 0 && errno != EAGAIN) break;  // the pair closed its end after a failure
      } else if (close_after && sp[1] >= 0) {
        ::close(sp[1]);
        sp[1] = -1;
        moved = true;
      }
      moved |= dev->poll();
      idle = moved ? 0 : idle + 1;
    }
    std::vector<std::vector<uint8_t>> payloads;
    const std::vector<Expect> want = expected_outcomes(stream, written, recvs, &payloads);
    for (size_t i = 0; i < recvs.size(); ++i) {
      const transport::Request& r = recvs[i].req;
      if (r.transferred > r.bytes) std::abort();
      // A failure says where it came from; an abort notice carries the peer's own reason (the
      // engine names the rank that sent it).
      if (r.state == transport::Request::State::failed && r.failure != transport::Failure::peer_aborted &&
          r.detail.find("rank 0") == std::string::npos)
        std::abort();
      switch (want[i]) {
        case Expect::complete:
          if (r.state != transport::Request::State::done || recvs[i].buf != payloads[i]) std::abort();
          break;
        case Expect::mismatch:
          if (r.state != transport::Request::State::failed) std::abort();
          break;
        case Expect::unsettled:
          if (r.state == transport::Request::State::done) std::abort();  // nothing in the stream for it
          break;
      }
    }
    if (sp[1] >= 0) ::close(sp[1]);  // lets the device's linger after a failure end at once
  }
  return 0;
}
