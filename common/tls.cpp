#include "common/tls.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/config.hpp"
#include "common/crypto.hpp"
#include "kolo/error.hpp"

namespace kolo {

namespace {

// The external PSK's identity: both ends derive the same key from the job secret, so the name
// only says which derivation (a later one gets a new name and a mismatch fails cleanly).
constexpr char kPskIdentity[] = "kolo-tls-psk-v1";
// TLS_AES_256_GCM_SHA384: the suite a PSK session is bound to (and the one measured against
// `openssl speed -evp aes-256-gcm` in docs/PERFORMANCE.md).
constexpr unsigned char kAes256GcmSha384[] = {0x13, 0x02};
// One TLS record's plaintext at most.
constexpr size_t kRecordBytes = 16384;

std::string drain_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    // "error:0A000126:SSL routines::unexpected eof while reading" -> keep the reason only.
    const char* reason = std::strrchr(buf, ':');
    if (!out.empty()) out += "; ";
    out += reason && reason[1] ? reason + 1 : buf;
  }
  return out;
}

SSL_SESSION* psk_session(SSL* ssl, const TlsContext* c) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes256GcmSha384);
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr || cipher == nullptr || !SSL_SESSION_set1_master_key(s, c->psk().data(), c->psk().size()) ||
      !SSL_SESSION_set_cipher(s, cipher) || !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

const TlsContext* owner(SSL* ssl) { return static_cast<const TlsContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), 0)); }

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
  SSL_SESSION* s = psk_session(ssl, owner(ssl));
  if (s == nullptr) return 0;
  if (md != nullptr && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    // A second call after a HelloRetryRequest for another hash: this key fits none but its own.
    SSL_SESSION_free(s);
    *sess = nullptr;
    *id = nullptr;
    *idlen = 0;
    return 1;
  }
  *sess = s;
  *id = reinterpret_cast<const unsigned char*>(kPskIdentity);
  *idlen = sizeof kPskIdentity - 1;
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* id, size_t len, SSL_SESSION** sess) {
  *sess = nullptr;
  if (len != sizeof kPskIdentity - 1 || std::memcmp(id, kPskIdentity, len) != 0) return 1;  // unknown: no PSK
  *sess = psk_session(ssl, owner(ssl));
  return *sess != nullptr ? 1 : 0;
}

// OpenSSL's socket BIO writes with write(2), so a peer that is gone would raise SIGPIPE, and a
// library must not kill its host process for that. This BIO is the socket BIO (its reads, its
// ctrl, which kTLS goes through) with writes by send(MSG_NOSIGNAL). Once the kernel seals the
// records (kTLS), writes go back to the socket BIO's own, which sends control records its way;
// the data path then uses sendmsg itself (tcp_pair.cpp).
int nosignal_write(BIO* b, const char* data, int len) {
  static int (*const socket_write)(BIO*, const char*, int) = BIO_meth_get_write(BIO_s_socket());
  if (BIO_get_ktls_send(b)) return socket_write(b, data, len);
  int fd = -1;
  BIO_get_fd(b, &fd);
  errno = 0;
  const ssize_t r = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  BIO_clear_retry_flags(b);
  if (r <= 0 && BIO_sock_should_retry(static_cast<int>(r))) BIO_set_retry_write(b);
  return static_cast<int>(r);
}

BIO_METHOD* nosignal_socket() {
  static BIO_METHOD* const method = [] {
    const BIO_METHOD* base = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "kolo socket (MSG_NOSIGNAL)");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, nosignal_write);
    BIO_meth_set_read(m, BIO_meth_get_read(base));
    BIO_meth_set_puts(m, BIO_meth_get_puts(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    return m;
  }();
  return method;
}

}  // namespace

TlsSettings TlsSettings::from_config() {
  TlsSettings s;
  const std::string on = config::get_string("KOLO_TLS");
  if (on != "0" && on != "1") throw InvalidArgument("KOLO_TLS='" + on + "': expected 0 or 1");
  s.on = on == "1";
  s.cert = config::get_string("KOLO_TLS_CERT");
  s.key = config::get_string("KOLO_TLS_KEY");
  s.ca = config::get_string("KOLO_TLS_CA");
  s.secret_given = config::is_set("KOLO_SECRET");
  return s;
}

std::shared_ptr<const TlsContext> TlsContext::for_store(bool authenticated, const TlsSecret& key) {
  TlsSettings s = TlsSettings::from_config();
  if (!s.on || !authenticated) return nullptr;
  s.secret_given = true;  // the store's key is the job secret's
  return std::make_shared<const TlsContext>(s, key);
}

TlsContext::TlsContext(const TlsSettings& s, const TlsSecret& secret) {
  if (s.certificates() && (s.cert.empty() || s.key.empty() || s.ca.empty()))
    throw InvalidArgument("KOLO_TLS=1 with certificates needs all of KOLO_TLS_CERT, KOLO_TLS_KEY and KOLO_TLS_CA (have: " +
                          std::string(s.cert.empty() ? "" : "CERT ") + (s.key.empty() ? "" : "KEY ") + (s.ca.empty() ? "" : "CA") + ")");
  use_psk_ = !s.certificates();
  if (use_psk_ && !s.secret_given)
    throw InvalidArgument(
        "KOLO_TLS=1 needs KOLO_SECRET (the pre-shared key that TLS trusts is derived from it: every rank must share it) "
        "or certificates (KOLO_TLS_CERT, KOLO_TLS_KEY, KOLO_TLS_CA)");
  ctx_ = SSL_CTX_new(TLS_method());
  if (ctx_ == nullptr) throw Error("KOLO_TLS: SSL_CTX_new failed: " + drain_errors());
  SSL_CTX_set_ex_data(ctx_, 0, this);
  // TLS 1.3 only: a peer offering anything older is refused, never downgraded to.
  SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx_, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx_, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256");
  // Nothing but application data after the handshake (no tickets: no resumption wanted, and a
  // post-handshake message would fail a kTLS receive), kernel records where offered, and
  // SSL_write that returns after each record with a retry allowed from a rebuilt buffer.
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET | SSL_OP_ENABLE_KTLS);
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  // Read ahead: one recv takes whatever records have arrived (up to 64 KiB) instead of one
  // recv for each record's header and one for its body. read() returns EAGAIN only once
  // OpenSSL's buffer is empty too, so a short read still means "drained" to its callers.
  SSL_CTX_set_read_ahead(ctx_, 1);
  SSL_CTX_set_default_read_buffer_len(ctx_, 64 * 1024);
  if (use_psk_) {
    // HMAC of the job secret under a label of its own: the key proved in kolo's hello and the
    // one TLS uses are never the same bytes.
    static const char kLabel[] = "kolo-tls-psk-v1";
    const crypto::Digest d = crypto::hmac_sha256(secret.data(), secret.size(), reinterpret_cast<const uint8_t*>(kLabel),
                                                 sizeof kLabel - 1, "KOLO_TLS pre-shared key");
    std::copy(d.begin(), d.end(), psk_.begin());
    SSL_CTX_set_psk_use_session_callback(ctx_, use_psk);
    SSL_CTX_set_psk_find_session_callback(ctx_, find_psk);
    return;
  }
  auto fail = [&](const std::string& what) {
    const std::string why = drain_errors();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw InvalidArgument(what + (why.empty() ? "" : ": " + why));
  };
  if (SSL_CTX_use_certificate_chain_file(ctx_, s.cert.c_str()) != 1) fail("KOLO_TLS_CERT='" + s.cert + "': cannot load the certificate");
  if (SSL_CTX_use_PrivateKey_file(ctx_, s.key.c_str(), SSL_FILETYPE_PEM) != 1) fail("KOLO_TLS_KEY='" + s.key + "': cannot load the key");
  if (SSL_CTX_check_private_key(ctx_) != 1) fail("KOLO_TLS_KEY='" + s.key + "' does not match KOLO_TLS_CERT='" + s.cert + "'");
  if (SSL_CTX_load_verify_locations(ctx_, s.ca.c_str(), nullptr) != 1) fail("KOLO_TLS_CA='" + s.ca + "': cannot load the CA certificate(s)");
  // Both sides show a certificate the CA vouches for (as Gloo's TCP_TLS). Host names are not
  // checked: ranks connect to addresses they read from the store, not to names.
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

TlsSession::TlsSession(const TlsContext& ctx, int fd, bool client, std::string peer)
    : peer_(std::move(peer)), client_(client) {
  ssl_ = SSL_new(ctx.ctx());
  BIO* bio = nosignal_socket() ? BIO_new(nosignal_socket()) : nullptr;
  if (ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    SSL_free(ssl_);
    throw Error("TLS with " + peer_ + ": SSL_new failed: " + drain_errors());
  }
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl_, bio, bio);
  if (client) SSL_set_connect_state(ssl_);
  else SSL_set_accept_state(ssl_);
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

std::string TlsSession::ssl_error_text(int ret) const {
  const int e = SSL_get_error(ssl_, ret);
  const int saved = errno;
  std::string text = drain_errors();
  if (e == SSL_ERROR_SYSCALL && text.empty())
    text = saved != 0 ? std::string(std::strerror(saved)) : "the connection was closed in the middle of the handshake";
  if (e == SSL_ERROR_ZERO_RETURN) text = "the peer closed the TLS session";
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) text += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
  // A peer speaking kolo frames in clear where TLS records were expected.
  if (text.find("wrong version number") != std::string::npos || text.find("packet length too long") != std::string::npos ||
      text.find("record layer failure") != std::string::npos)
    text += " (not TLS: is KOLO_TLS=1 set on every rank?)";
  return text.empty() ? "unknown TLS error" : text;
}

TlsSession::Step TlsSession::handshake() {
  if (done_) return Step::done;
  if (!error_.empty()) return Step::failed;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) {
    done_ = true;
    ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_));
    ktls_recv_ = BIO_get_ktls_recv(SSL_get_rbio(ssl_));
    return Step::done;
  }
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ: return Step::want_read;
    case SSL_ERROR_WANT_WRITE: return Step::want_write;
    default: break;
  }
  error_ = "TLS handshake with " + peer_ + " failed: " + ssl_error_text(ret);
  return Step::failed;
}

void TlsSession::handshake_until(std::chrono::steady_clock::time_point deadline, int peer_rank) {
  for (;;) {
    const Step s = handshake();
    if (s == Step::done) return;
    if (s == Step::failed) throw PeerError(error_, peer_rank);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) throw TimeoutError("TLS handshake with " + peer_ + " did not finish before the timeout", peer_rank);
    pollfd p{SSL_get_fd(ssl_), static_cast<short>(s == Step::want_read ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
  }
}

ssize_t TlsSession::fail(const std::string& what) {
  if (error_.empty()) error_ = what;
  errno = EPROTO;
  return -1;
}

bool TlsSession::ready_for_data() {
  if (!done_) {
    const Step s = handshake();
    if (s == Step::failed) {
      fail(error_);
      return false;
    }
    if (s != Step::done) {
      errno = EAGAIN;
      return false;
    }
  }
  if (!error_.empty()) {
    fail(error_);
    return false;
  }
  return true;
}

ssize_t TlsSession::read(void* buf, size_t len) {
  if (!ready_for_data()) return -1;
  if (eof_) return 0;
  size_t got = 0;
  while (got < len) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    const int ret = SSL_read_ex(ssl_, static_cast<char*>(buf) + got, len - got, &n);
    if (ret == 1) {
      got += n;
      continue;
    }
    const int e = SSL_get_error(ssl_, ret);
    if (e == SSL_ERROR_WANT_READ) break;
    const int saved = errno;
    // The end of the stream. Ranks close without a close_notify (as plain TCP closes, after
    // their goodbye frame), so an unexpected EOF between records is an ordinary end; the pair
    // decides from the goodbye whether it was orderly. One in the middle of a record is not.
    const bool reset = e == SSL_ERROR_SYSCALL && (saved == ECONNRESET || saved == 0) && ERR_peek_error() == 0;
    const bool eof_between = e == SSL_ERROR_ZERO_RETURN || reset ||
                             (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING &&
                              SSL_has_pending(ssl_) == 0);
    if (eof_between) {
      ERR_clear_error();
      eof_ = true;
      return static_cast<ssize_t>(got);  // 0 at once, or the bytes before the end (then 0 next time)
    }
    std::string why = ssl_error_text(ret);
    if (e == SSL_ERROR_SSL && why.find("unexpected eof") != std::string::npos) why = "a TLS record was cut short by the end of the connection";
    // Nothing of a broken stream is delivered, not even the records before the bad one in this
    // read: the connection fails as a whole.
    return fail("TLS record from " + peer_ + " refused: " + why);
  }
  if (got == 0) {
    errno = EAGAIN;
    return -1;
  }
  return static_cast<ssize_t>(got);
}

ssize_t TlsSession::writev(const iovec* iov, int n) {
  if (!ready_for_data()) return -1;
  // The first piece alone when it fills a record (a large payload: sealed from the caller's
  // buffer, no copy); else the pieces gathered into one record (a header and the start of its
  // payload: one record, not a 40-byte one and then the payload).
  const void* src = iov[0].iov_base;
  size_t len = iov[0].iov_len;
  if (n > 1 && len < kRecordBytes) {
    if (!staging_) staging_.reset(new char[kRecordBytes]);
    len = 0;
    for (int i = 0; i < n && len < kRecordBytes; ++i) {
      const size_t take = std::min(iov[i].iov_len, kRecordBytes - len);
      std::memcpy(staging_.get() + len, iov[i].iov_base, take);
      len += take;
    }
    src = staging_.get();
  }
  len = std::min(len, kRecordBytes);
  ERR_clear_error();
  errno = 0;
  size_t wrote = 0;
  const int ret = SSL_write_ex(ssl_, src, len, &wrote);
  if (ret == 1) {
    write_pending_ = false;
    return static_cast<ssize_t>(wrote);
  }
  const int e = SSL_get_error(ssl_, ret);
  if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
    write_pending_ = true;
    errno = EAGAIN;
    return -1;
  }
  const int saved = errno;
  if (e == SSL_ERROR_SYSCALL && (saved == EPIPE || saved == ECONNRESET)) {
    ERR_clear_error();
    errno = saved;  // the pair reports a closed connection, as for plain TCP
    return -1;
  }
  return fail("TLS send to " + peer_ + " failed: " + ssl_error_text(ret));
}

bool TlsSession::buffered() const { return SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1; }

std::string tls_peer_name(const std::string& who, int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return who;
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  } else {
    return who;
  }
  return who + " at " + host + ":" + std::to_string(port);
}

}  // namespace kolo
