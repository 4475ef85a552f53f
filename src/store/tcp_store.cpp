// TCPStore's client, speaking c10d's TCPStore protocol (tcp_store_wire.hpp), and the factories
// TCPStore::create and TCPStoreServer::start.
//
// One connection per object; one request at a time on it (a mutex), each bounded by poll()
// deadlines. Like c10d's client, user keys travel with a "/" in front and the joining count lives
// in "init/", so a torch TCPStore and a kolo TCPStore on the same server see the same keys.
//
// The dialect (torch <= 2.0 or >= 2.1) is found once per client: it opens with VALIDATE + PING.
// A >= 2.1 server echoes the ping. A legacy server reads the same bytes as a SET whose key length
// is >= 2^63 (the ping's nonce is chosen so), fails to allocate it, and hangs up at once without
// having stored anything; the client then reconnects and speaks the legacy dialect.
//
// With a secret, every connection (the first, the probe's second, every reconnect) opens with
// kolo's store authentication (store_auth.hpp) before any of that, and a server that cannot
// prove the secret is refused with an error saying so.
#include <unistd.h>

#include <optional>

#include <mutex>
#include <random>
#include <thread>

#include "common/tls.hpp"
#include "kolo/error.hpp"
#include "store/store_auth.hpp"
#include "store/store_socket.hpp"
#include "store/tcp_store_server.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo {
namespace {

using namespace store_detail;

// How long a CANCEL_WAIT's answer, or the handshake's echo, may take once the server is known
// to be alive.
constexpr std::chrono::milliseconds kReplyGrace{5000};

class TcpStoreClient final : public TCPStore {
 public:
  TcpStoreClient(std::string host, uint16_t port, std::chrono::milliseconds timeout, Protocol protocol,
                 std::optional<auth::Key> key, std::unique_ptr<TcpStoreServerCore> server,
                 std::shared_ptr<const TlsContext> tls)
      : server_(std::move(server)), host_(std::move(host)), port_(port), protocol_(protocol), key_(key), tls_ctx_(std::move(tls)) {
    timeout_ = timeout;
    std::lock_guard guard(mu_);
    connect_locked();
  }

  ~TcpStoreClient() override {
    tls_.reset();
    if (fd_ >= 0) ::close(fd_);
    // server_ (if we host it) stops after our connection is gone; other clients then see EOF.
  }

  uint16_t port() const override { return port_; }
  std::string protocol_name() const override { return dialect_name(dialect_); }

  void set(const std::string& key, const Bytes& value) override {
    WireWriter req;
    req.op(StoreOp::kSet, dialect_).key(kUserKeyPrefix + key).value(value);
    std::lock_guard guard(mu_);
    send_locked(StoreOp::kSet, req, deadline_after(timeout_));
  }

  Bytes get(const std::string& key) override {
    wait({key}, timeout_);
    std::lock_guard guard(mu_);
    return get_locked(kUserKeyPrefix + key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard guard(mu_);
    return add_locked(kUserKeyPrefix + key, delta);
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    WireWriter req;
    req.op(StoreOp::kCompareSet, dialect_).key(kUserKeyPrefix + key).value(expected).value(desired);
    std::lock_guard guard(mu_);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kCompareSet, req, deadline);
    return read_value(StoreOp::kCompareSet, deadline);
  }

  bool delete_key(const std::string& key) override {
    WireWriter req;
    req.op(StoreOp::kDeleteKey, dialect_).key(kUserKeyPrefix + key);
    std::lock_guard guard(mu_);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kDeleteKey, req, deadline);
    return read_i64(StoreOp::kDeleteKey, deadline) > 0;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard guard(mu_);
    return check_locked(prefixed(keys));
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (keys.empty()) return;
    auto wire_keys = prefixed(keys);
    WireWriter req;
    req.op(StoreOp::kWait, dialect_).keys(wire_keys);
    std::lock_guard guard(mu_);
    send_locked(StoreOp::kWait, req, deadline_after(timeout_));
    uint8_t reply = 0;
    IoResult io = recv_exact(fd_, &reply, 1, deadline_after(timeout), tls_.get());
    if (io.status == IoStatus::kOk) {
      if (reply != kStopWaiting) protocol_error(StoreOp::kWait, "reply " + std::to_string(reply));
      return;
    }
    if (io.status != IoStatus::kTimeout) io_failed(StoreOp::kWait, io, timeout);
    cancel_wait_locked();
    // Name the keys still missing, asked one by one on the (clean) connection.
    std::vector<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!check_locked({wire_keys[i]})) missing.push_back(keys[i]);
    }
    if (missing.empty()) return;  // they arrived while we cancelled
    // The keys may be missing because their writers were refused by the server we host: say so,
    // or the rank hosting the store of a job whose ranks disagree on the secret only times out.
    if (server_ && server_->refused_connections() > 0) {
      try {
        throw_wait_timeout("TCPStore(" + endpoint() + ")", missing, timeout);
      } catch (const TimeoutError& e) {
        throw TimeoutError(std::string(e.what()) + "; meanwhile this store refused " +
                           std::to_string(server_->refused_connections()) +
                           " connection(s) that did not prove the job secret (ranks started with another KOLO_SECRET?)");
      }
    }
    throw_wait_timeout("TCPStore(" + endpoint() + ")", missing, timeout);
  }

  int64_t num_keys() override {
    WireWriter req;
    req.op(StoreOp::kNumKeys, dialect_);
    std::lock_guard guard(mu_);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kNumKeys, req, deadline);
    return read_i64(StoreOp::kNumKeys, deadline);
  }

  // Counts this client in "init/" (as c10d's clients do when they know the world size), and on
  // the server side waits until `world_size` clients have.
  void join(int world_size, bool wait_for_all) {
    if (world_size <= 0) return;
    std::lock_guard guard(mu_);
    int64_t joined = add_locked(kInitKey, 1);
    if (!wait_for_all) return;
    const auto deadline = deadline_after(timeout_);
    auto pause = std::chrono::milliseconds(1);
    while (joined < world_size) {
      if (remaining(deadline).count() == 0) {
        throw TimeoutError("TCPStore: only " + std::to_string(joined) + " of " + std::to_string(world_size) +
                           " clients joined " + endpoint() + " within " + std::to_string(timeout_.count()) + " ms");
      }
      // c10d's server-side client polls the count too; a growing pause keeps that cheap.
      std::this_thread::sleep_for(std::min(pause, remaining(deadline)));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
      joined = add_locked(kInitKey, 0);
    }
  }

 private:
  std::string endpoint() const { return host_ + ":" + std::to_string(port_); }

  static std::vector<std::string> prefixed(const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(kUserKeyPrefix + k);
    return out;
  }

  // Opens the connection and, the first time, finds the server's dialect.
  void connect_locked() {
    open_locked();
    if (protocol_ == Protocol::kLegacy || (protocol_ == Protocol::kAuto && dialect_known_ &&
                                           dialect_ == Dialect::kLegacy)) {
      dialect_ = Dialect::kLegacy;
      dialect_known_ = true;
      return;
    }
    WireWriter hello;
    hello.op(StoreOp::kValidate, Dialect::kValidated).u32(kValidationMagic);
    if (protocol_ == Protocol::kValidated || dialect_known_) {
      // Known (or forced) >= 2.1: just open the connection, as c10d's client does.
      dialect_ = Dialect::kValidated;
      dialect_known_ = true;
      send_locked(StoreOp::kValidate, hello, deadline_after(timeout_));
      return;
    }
    // Probe: VALIDATE + PING. The nonce's third byte is 0xff so that a legacy server, reading the
    // bytes after its SET code as a u64 key length, sees >= 2^63 and hangs up (see the top).
    std::random_device rd;
    const uint32_t nonce = (rd() & 0xff00ffffu) | 0x00ff0000u;
    hello.op(StoreOp::kPing, Dialect::kValidated).u32(nonce);
    const auto deadline = deadline_after(std::min(timeout_, kReplyGrace));
    IoResult io = send_all(fd_, hello.bytes().data(), hello.bytes().size(), deadline, tls_.get());
    uint8_t echo[4];
    if (io.status == IoStatus::kOk) io = recv_exact(fd_, echo, sizeof(echo), deadline, tls_.get());
    if (io.status == IoStatus::kOk) {
      WireReader r(echo, sizeof(echo));
      if (r.u32() != nonce) {
        drop_connection();
        throw PeerError("TCPStore: " + endpoint() + " answered the handshake with a wrong ping: not a c10d TCPStore?",
                        -1);
      }
      dialect_ = Dialect::kValidated;
      dialect_known_ = true;
      return;
    }
    drop_connection();
    if (io.status == IoStatus::kTimeout) {
      throw TimeoutError("TCPStore: " + endpoint() + " did not answer the c10d handshake within " +
                         std::to_string(std::min(timeout_, kReplyGrace).count()) +
                         " ms (not a TCPStore? set KOLO_STORE_PROTOCOL=torch1 or torch2 to skip the probe)");
    }
    // Hung up: a legacy (torch <= 2.0) server. Reconnect and speak its dialect.
    dialect_ = Dialect::kLegacy;
    dialect_known_ = true;
    open_locked();
  }

  // A new connection, authenticated when there is a key.
  void open_locked() {
    fd_ = connect_with_retry(host_, port_, timeout_);
    if (tls_ctx_) start_tls_locked();
    if (key_) authenticate_locked();
  }

  // KOLO_TLS=1 (common/tls.hpp): the TLS handshake before anything else, so that the store's
  // authentication, keys and values all travel sealed.
  void start_tls_locked() {
    tls_ = std::make_unique<TlsSession>(*tls_ctx_, fd_, true, tls_peer_name("TCPStore", fd_));
    try {
      tls_->handshake_until(deadline_after(std::min(timeout_, kReplyGrace)), -1);
    } catch (const Error& e) {
      drop_connection();
      throw PeerError(std::string(e.what()) +
                          " (KOLO_TLS=1: the store must be kolo's, with KOLO_TLS=1 and the same KOLO_SECRET or CA)",
                      -1);
    }
  }

  // Kolo's store authentication (store_auth.hpp): our nonce, the server's nonce and proof, which
  // we check before sending ours. A server that hangs up, stays silent or proves nothing is not
  // kolo's store holding this job's secret: refused, whatever else it might be.
  void authenticate_locked() {
    const auth::Nonce nonce = auth::fresh_nonce();
    const auto hello = auth::client_hello(nonce);
    const auto deadline = deadline_after(std::min(timeout_, kReplyGrace));
    IoResult io = send_all(fd_, hello.data(), hello.size(), deadline, tls_.get());
    uint8_t reply[auth::kServerReplyBytes];
    if (io.status == IoStatus::kOk) io = recv_exact(fd_, reply, sizeof(reply), deadline, tls_.get());
    if (io.status != IoStatus::kOk) {
      drop_connection();
      throw PeerError("TCPStore: " + endpoint() + " did not answer kolo's store authentication (" +
                          (io.status == IoStatus::kTimeout ? "no reply" : "it hung up") +
                          "): a torch TCPStore, or a kolo store without authentication (KOLO_STORE_AUTH=off, or no "
                          "KOLO_SECRET where it runs), cannot take clients that have a job secret; set "
                          "KOLO_STORE_AUTH=off on the clients to use it unauthenticated" +
                          std::string(tls_ctx_ ? "" : "; or the store has KOLO_TLS=1 and this process not"),
                      -1);
    }
    const auto proof = auth::client_answer(*key_, nonce, reply);
    if (!proof) {
      drop_connection();
      throw PeerError("TCPStore: " + endpoint() +
                          " failed to prove the job secret: refused (a store of another job, another KOLO_SECRET, or "
                          "an impostor)",
                      -1);
    }
    io = send_all(fd_, proof->data(), proof->size(), deadline, tls_.get());
    if (io.status != IoStatus::kOk) io_failed(StoreOp::kValidate, io, std::min(timeout_, kReplyGrace));
  }

  // Sends one request; reconnects first if an earlier failure dropped the connection.
  void send_locked(StoreOp op, const WireWriter& req, Clock::time_point deadline) {
    if (fd_ < 0) connect_locked();
    IoResult io = send_all(fd_, req.bytes().data(), req.bytes().size(), deadline, tls_.get());
    if (io.status != IoStatus::kOk) io_failed(op, io, remaining(deadline));
  }

  Bytes get_locked(const std::string& wire_key) {
    WireWriter req;
    req.op(StoreOp::kGet, dialect_).key(wire_key);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kGet, req, deadline);
    return read_value(StoreOp::kGet, deadline);
  }

  int64_t add_locked(const std::string& wire_key, int64_t delta) {
    WireWriter req;
    req.op(StoreOp::kAdd, dialect_).key(wire_key).i64(delta);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kAdd, req, deadline);
    uint8_t raw[8];
    IoResult io = recv_exact(fd_, raw, sizeof(raw), deadline, tls_.get());
    if (io.status == IoStatus::kClosed) {
      drop_connection();
      // c10d servers hang up on an add to a value that is not a decimal integer (kolo's also on an
      // overflow). Tell that from a vanished server by reading the value.
      const std::string user_key = wire_key.substr(wire_key.rfind(kUserKeyPrefix, 0) == 0 ? 1 : 0);
      Bytes value;
      try {
        if (check_locked({wire_key})) value = get_locked(wire_key);
      } catch (const Error&) {
        io_failed(StoreOp::kAdd, io, timeout_);
      }
      add_to_counter(user_key, parse_counter(user_key, value), delta);  // throws for a bad value or an overflow
      io_failed(StoreOp::kAdd, io, timeout_);
    }
    if (io.status != IoStatus::kOk) io_failed(StoreOp::kAdd, io, timeout_);
    WireReader r(raw, sizeof(raw));
    return r.i64();
  }

  bool check_locked(const std::vector<std::string>& wire_keys) {
    WireWriter req;
    req.op(StoreOp::kCheck, dialect_).keys(wire_keys);
    const auto deadline = deadline_after(timeout_);
    send_locked(StoreOp::kCheck, req, deadline);
    uint8_t reply = 0;
    IoResult io = recv_exact(fd_, &reply, 1, deadline, tls_.get());
    if (io.status != IoStatus::kOk) io_failed(StoreOp::kCheck, io, timeout_);
    if (reply != kCheckReady && reply != kCheckNotReady) protocol_error(StoreOp::kCheck, "reply " + std::to_string(reply));
    return reply == kCheckReady;
  }

  // A WAIT timed out. The server still has it parked: cancel it where the dialect can (the
  // answer may be preceded by a STOP_WAITING that crossed our cancel), else start afresh.
  void cancel_wait_locked() {
    if (dialect_ != Dialect::kValidated) {
      drop_connection();  // torch 1.13 has no CANCEL_WAIT; a new connection forgets the WAIT
      return;
    }
    WireWriter req;
    req.op(StoreOp::kCancelWait, dialect_);
    const auto deadline = deadline_after(kReplyGrace);
    send_locked(StoreOp::kCancelWait, req, deadline);
    for (int replies = 0; replies < 2; ++replies) {
      uint8_t reply = 0;
      IoResult io = recv_exact(fd_, &reply, 1, deadline, tls_.get());
      if (io.status != IoStatus::kOk) io_failed(StoreOp::kCancelWait, io, kReplyGrace);
      if (reply == kWaitCanceled) return;
      if (reply != kStopWaiting) break;
    }
    protocol_error(StoreOp::kCancelWait, "no WAIT_CANCELED");
  }

  int64_t read_i64(StoreOp op, Clock::time_point deadline) {
    uint8_t raw[8];
    IoResult io = recv_exact(fd_, raw, sizeof(raw), deadline, tls_.get());
    if (io.status != IoStatus::kOk) io_failed(op, io, timeout_);
    WireReader r(raw, sizeof(raw));
    return r.i64();
  }

  Bytes read_value(StoreOp op, Clock::time_point deadline) {
    uint64_t size = static_cast<uint64_t>(read_i64(op, deadline));
    if (size > kMaxValueBytes) protocol_error(op, "a value of " + std::to_string(size) + " bytes");
    Bytes out(size);
    IoResult io = recv_exact(fd_, out.data(), out.size(), deadline, tls_.get());
    if (io.status != IoStatus::kOk) io_failed(op, io, timeout_);
    return out;
  }

  [[noreturn]] void protocol_error(StoreOp op, const std::string& what) {
    drop_connection();
    throw PeerError("TCPStore: malformed reply from " + endpoint() + " to " + op_name(op) + ": " + what, -1);
  }

  // Any transport failure drops the connection (its state is unknown); the next request reconnects.
  std::string tls_failure(int err) const { return tls_ && !tls_->error().empty() ? tls_->error() : errno_text(err); }

  [[noreturn]] void io_failed(StoreOp op, IoResult io, std::chrono::milliseconds waited) {
    const std::string why = tls_failure(io.err);
    drop_connection();
    switch (io.status) {
      case IoStatus::kTimeout:
        throw TimeoutError("TCPStore: no reply from " + endpoint() + " to " + op_name(op) + " within " +
                           std::to_string(waited.count()) + " ms");
      case IoStatus::kClosed:
        throw PeerError("TCPStore: connection to " + endpoint() + " closed during " + op_name(op) +
                            (io.err ? ": " + why : std::string(" (server gone?)")),
                        -1);
      default:
        throw PeerError("TCPStore: " + std::string(op_name(op)) + " to " + endpoint() + " failed: " + why, -1);
    }
  }

  void drop_connection() {
    tls_.reset();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::unique_ptr<TcpStoreServerCore> server_;  // declared first: destroyed after the client
  std::mutex mu_;  // one request at a time on the connection
  std::string host_;
  uint16_t port_;
  Protocol protocol_;
  std::optional<auth::Key> key_;  // set: authenticate every connection
  std::shared_ptr<const TlsContext> tls_ctx_;  // set: KOLO_TLS=1, every connection in TLS
  std::unique_ptr<TlsSession> tls_;            // the connection's, while it is open
  Dialect dialect_ = Dialect::kValidated;
  bool dialect_known_ = false;
  int fd_ = -1;
};

class StandaloneServer final : public TCPStoreServer {
 public:
  explicit StandaloneServer(std::unique_ptr<TcpStoreServerCore> core) : core_(std::move(core)) {}
  uint16_t port() const override { return core_->port(); }

 private:
  std::unique_ptr<TcpStoreServerCore> core_;
};

}  // namespace

std::shared_ptr<TCPStore> TCPStore::create(const Options& opts) {
  std::unique_ptr<TcpStoreServerCore> server;
  std::optional<auth::Key> key;
  if (!opts.secret.empty()) key = auth::derive_key(opts.secret);
  const auto tls = TlsContext::for_store(key.has_value(), key.value_or(auth::Key{}));
  uint16_t port = opts.port;
  if (opts.is_server) {
    server = TcpStoreServerCore::start(opts.host, opts.port, key, TcpStoreServerCore::kAuthDeadline, tls);
    port = server->port();
  }
  auto client = std::make_shared<TcpStoreClient>(opts.host, port, opts.timeout, opts.protocol, key, std::move(server), tls);
  client->join(opts.world_size, opts.is_server);
  return client;
}

std::unique_ptr<TCPStoreServer> TCPStoreServer::start(const std::string& host, uint16_t port, const std::string& secret) {
  std::optional<auth::Key> key;
  if (!secret.empty()) key = auth::derive_key(secret);
  return std::make_unique<StandaloneServer>(TcpStoreServerCore::start(
      host, port, key, TcpStoreServerCore::kAuthDeadline, TlsContext::for_store(key.has_value(), key.value_or(auth::Key{}))));
}

}  // namespace kolo
