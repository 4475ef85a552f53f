// libFuzzer target: the TLS record path (common/tls.hpp, KOLO_TLS=1) fed bytes by someone without
// the key, over a real socket pair. Byte 0 picks the mode, the rest is the input:
//   0: a TLS server (pre-shared key mode) reads the input as a client's handshake; it must never
//      finish the handshake (nobody without the key can);
//   1: after a real handshake the input arrives as records on the connection; nothing of it may
//      be delivered;
//   2: after a real handshake a genuine record of 64 bytes is sent with the input XORed over its
//      bytes on the wire: the plaintext is delivered exactly when the mask changed nothing of the
//      record, and nothing of it otherwise.
// Beyond those, no crash and no sanitizer report.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/tls.hpp"

using namespace kolo;

namespace {

const TlsContext& context() {
  static const TlsContext ctx = [] {
    TlsSettings s;
    s.on = true;
    s.secret_given = true;
    TlsSecret secret{};
    secret.fill(0x5a);
    return TlsContext(s, secret);
  }();
  return ctx;
}

struct Pair {
  int client = -1, server = -1;
  Pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) std::abort();
    client = sv[0];
    server = sv[1];
  }
  ~Pair() {
    ::close(client);
    ::close(server);
  }
};

void raw_send(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;  // the buffer is full: the rest is dropped, as a peer that stops would
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Both handshakes, alternating without blocking (one thread, a socket pair).
bool handshake(TlsSession& c, TlsSession& s) {
  for (int i = 0; i < 100; ++i) {
    const auto a = c.handshake(), b = s.handshake();
    if (a == TlsSession::Step::failed || b == TlsSession::Step::failed) return false;
    if (a == TlsSession::Step::done && b == TlsSession::Step::done) return true;
  }
  return false;
}

// Everything the server delivers until it has nothing more (or fails).
std::vector<uint8_t> drain(TlsSession& s) {
  std::vector<uint8_t> got;
  uint8_t buf[4096];
  for (int i = 0; i < 1000; ++i) {
    const ssize_t r = s.read(buf, sizeof buf);
    if (r <= 0) break;
    got.insert(got.end(), buf, buf + r);
  }
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  const uint8_t* in = data + 1;
  const size_t n = size - 1;
  Pair p;
  TlsSession server(context(), p.server, false, "fuzzed peer");
  if (mode == 0) {
    raw_send(p.client, in, n);
    ::shutdown(p.client, SHUT_WR);
    for (int i = 0; i < 8; ++i)
      if (server.handshake() == TlsSession::Step::done) std::abort();  // finished without the key
    return 0;
  }
  TlsSession client(context(), p.client, true, "fuzzer");
  if (!handshake(client, server)) std::abort();
  if (mode == 1) {
    raw_send(p.client, in, n);
    ::shutdown(p.client, SHUT_WR);
    if (!drain(server).empty()) std::abort();  // forged bytes delivered
    return 0;
  }
  // mode 2: a genuine record, captured off the wire, masked, sent again.
  uint8_t plain[64];
  for (size_t i = 0; i < sizeof plain; ++i) plain[i] = static_cast<uint8_t>(i * 7 + 1);
  iovec iov{plain, sizeof plain};
  if (client.writev(&iov, 1) != static_cast<ssize_t>(sizeof plain)) std::abort();
  uint8_t rec[5 + sizeof plain + 1 + 16];
  size_t got = 0;
  while (got < sizeof rec) {
    const ssize_t r = ::recv(p.server, rec + got, sizeof rec - got, 0);
    if (r <= 0) std::abort();
    got += static_cast<size_t>(r);
  }
  bool changed = false;
  for (size_t i = 0; i < sizeof rec && i < n; ++i) {
    rec[i] ^= in[i];
    changed |= in[i] != 0;
  }
  raw_send(p.client, rec, sizeof rec);
  ::shutdown(p.client, SHUT_WR);
  const std::vector<uint8_t> delivered = drain(server);
  if (changed && !delivered.empty()) std::abort();  // a tampered record delivered
  if (!changed && (delivered.size() != sizeof plain || std::memcmp(delivered.data(), plain, sizeof plain) != 0)) std::abort();
  return 0;
}
