// TLS 1.3 on a TCP connection (KOLO_TLS=1): OpenSSL's libssl, for the TCP transport's pairs
// (transports/tcp: after kolo's own hello, which proves the job secret and says who is calling,
// a TLS handshake runs on the same socket before any frame) and for kolo's own store (src/store:
// before the store's authentication and any request). Here, below both layers.
// Peers are trusted by one of two means, chosen by the settings:
//   - certificates (KOLO_TLS_CERT, KOLO_TLS_KEY, KOLO_TLS_CA, as Gloo's TCP_TLS names them:
//     cert, pkey, ca): both sides present a certificate that the CA file must vouch for;
//   - else an external pre-shared key derived from the job secret (KOLO_SECRET; no files): a
//     peer without the secret cannot finish the handshake. Key exchange is still (EC)DHE, so
//     recorded traffic stays sealed even if the secret leaks later.
// Only TLS 1.3 is offered or accepted (a peer offering 1.2 is refused), no session tickets are
// sent (nothing but application data follows the handshake, which kTLS receive needs).
//
// Where the kernel offers kTLS (SSL_OP_ENABLE_KTLS, the `tls` module), OpenSSL hands the record
// keys to the kernel after the handshake: the pair then sends and receives with plain
// sendmsg/recv, exactly its unencrypted fast path. Elsewhere (and for the receive direction on
// OpenSSL 3.0, which offloads TLS 1.3 sends only) records go through SSL_write/SSL_read.
#pragma once
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <memory>
#include <string>

#include <array>
#include <cstdint>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace kolo {

// The job secret as the transports derive it (SHA-256 of KOLO_SECRET's text).
using TlsSecret = std::array<uint8_t, 32>;

// What KOLO_TLS* say. Tests build their own to give ranks of one process different settings.
struct TlsSettings {
  bool on = false;
  std::string cert, key, ca;  // all three, or none (pre-shared key mode)
  bool secret_given = false;  // KOLO_SECRET is set: the pre-shared key mode needs it
  bool certificates() const { return !cert.empty() || !key.empty() || !ca.empty(); }
  static TlsSettings from_config();
};

// One per device: the SSL_CTX with its trust settings. Throws kolo::InvalidArgument for settings
// that cannot work (KOLO_TLS=1 with neither a secret nor certificates, a missing file, a key that
// does not match its certificate), naming the setting.
class TlsContext {
 public:
  TlsContext(const TlsSettings& s, const TlsSecret& secret);
  ~TlsContext();
  // kolo's own store (src/store): TLS when KOLO_TLS=1 and the store authenticates (its clients
  // and server hold the job secret, whose SHA-256 is `key`: kolo at both ends); else null, and
  // the store speaks c10d's protocol in clear as before (torch's clients and servers).
  static std::shared_ptr<const TlsContext> for_store(bool authenticated, const TlsSecret& key);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* ctx() const { return ctx_; }
  const TlsSecret& psk() const { return psk_; }
  bool uses_psk() const { return use_psk_; }

 private:
  SSL_CTX* ctx_ = nullptr;
  TlsSecret psk_{};
  bool use_psk_ = false;
};

// One connection's TLS state. The socket must be non-blocking. read() and writev() behave as
// recv() and sendmsg() do (bytes moved; 0 from read at end of stream; -1 with errno EAGAIN when
// the socket has nothing or no room), so the pair's code around them stays what it is for plain
// TCP; a broken or tampered record gives -1 with errno EPROTO, and error() says what happened.
class TlsSession {
 public:
  enum class Step { done, want_read, want_write, failed };

  // `peer` names the other end in errors ("rank 3 at 10.0.0.7:41234").
  TlsSession(const TlsContext& ctx, int fd, bool client, std::string peer);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Advances the handshake without blocking.
  Step handshake();
  bool handshaking() const { return !done_; }
  // The handshake, waiting for the socket until `deadline`; throws kolo::PeerError naming the
  // peer when it fails or times out.
  void handshake_until(std::chrono::steady_clock::time_point deadline, int peer_rank);

  // After the handshake: whether the kernel seals this direction's records (kTLS).
  bool kernel_sends() const { return ktls_send_; }
  bool kernel_receives() const { return ktls_recv_; }

  // As recv(): reads records until `len` bytes are delivered or the socket is drained, so that
  // a short read means "drained" as it does for recv() (the pair's edge-triggered reads rely
  // on it). During the handshake it advances it first; -1/EAGAIN while it is not done.
  ssize_t read(void* buf, size_t len);
  // As sendmsg(): at most one record per call (up to 16 KiB, the header and the start of the
  // payload sealed together). After -1/EAGAIN the next call must offer the same bytes (the pair
  // rebuilds the same iovecs from the same offsets).
  // (Sealing up to 256 KiB of records per send, with a 256 KiB read-ahead, was measured against
  // this: no gain at 1-64 MiB, 2 ranks, interleaved A/B; the time is the cipher's and the
  // copies', not the system calls': docs/PERFORMANCE.md, TLS.)
  ssize_t writev(const iovec* iov, int n);
  // Decrypted bytes (or a record's start) wait inside OpenSSL: the socket may be drained though
  // a read would return data, so level- or edge-triggered polling alone would not say so.
  bool buffered() const;
  // A record is half sent: nothing else (an abort notice) may be written before it.
  bool write_pending() const { return write_pending_; }
  const std::string& error() const { return error_; }
  const std::string& peer() const { return peer_; }

 private:
  ssize_t fail(const std::string& what);
  // The handshake finished (driving it on when it has not) and no error so far; else false with
  // errno EAGAIN (handshake under way) or EPROTO (failed).
  bool ready_for_data();
  std::string ssl_error_text(int ret) const;

  SSL* ssl_ = nullptr;
  std::string peer_;
  std::string error_;
  bool client_;
  bool done_ = false;
  bool eof_ = false;
  bool ktls_send_ = false, ktls_recv_ = false;
  bool write_pending_ = false;
  std::unique_ptr<char[]> staging_;  // header + start of payload, sealed as one record
};

// "<who> at host:port" for `fd`'s remote end (just `who` when the socket has no address).
std::string tls_peer_name(const std::string& who, int fd);

}  // namespace kolo
