// TCPStore's client (one connection per object; requests are blocking and bounded by poll()
// deadlines) and the factories TCPStore::create and TCPStoreServer::start.
//
// Joining: every client, once connected, adds 1 to an internal counter and records "client n
// joined" under an internal key. A server-side store created with world_size = N then waits
// (parked on the server, no polling) for the key of client N. Internal keys are not counted by
// num_keys().
#include <unistd.h>

#include <mutex>

#include "kolo/error.hpp"
#include "store/store_socket.hpp"
#include "store/tcp_store_server.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo {
namespace {

using namespace store_detail;

// How much longer than a GET/WAIT's own timeout the client waits for the server's TIMEOUT reply
// before it concludes the server is stuck.
constexpr std::chrono::milliseconds kServerReplyGrace{5000};

const std::string kJoinCounterKey = std::string(kInternalKeyPrefix) + "joined";
std::string joined_key(int64_t n) { return kJoinCounterKey + "/" + std::to_string(n); }

class TcpStoreClient final : public TCPStore {
 public:
  TcpStoreClient(std::string host, uint16_t port, std::chrono::milliseconds timeout,
                 std::unique_ptr<TcpStoreServerCore> server)
      : server_(std::move(server)), host_(std::move(host)), port_(port) {
    timeout_ = timeout;
    fd_ = connect_with_retry(host_, port_, timeout_);
  }

  ~TcpStoreClient() override {
    if (fd_ >= 0) ::close(fd_);
    // server_ (if we host it) stops after our connection is gone; other clients then see EOF.
  }

  uint16_t port() const override { return port_; }

  void set(const std::string& key, const Bytes& value) override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kSet)).str(key).bytes(value);
    auto reply = roundtrip(StoreOp::kSet, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kSet, timeout_);
  }

  Bytes get(const std::string& key) override {
    auto wait_for = timeout_;
    WireWriter req;
    req.u8(uint8_t(StoreOp::kGet)).str(key).i64(wait_for.count());
    auto reply = roundtrip(StoreOp::kGet, req, wait_for + kServerReplyGrace);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kGet, wait_for);
    return r.bytes();
  }

  int64_t add(const std::string& key, int64_t delta) override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kAdd)).str(key).i64(delta);
    auto reply = roundtrip(StoreOp::kAdd, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kAdd, timeout_);
    return r.i64();
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kCompareSet)).str(key).bytes(expected).bytes(desired);
    auto reply = roundtrip(StoreOp::kCompareSet, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kCompareSet, timeout_);
    return r.bytes();
  }

  bool delete_key(const std::string& key) override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kDelete)).str(key);
    auto reply = roundtrip(StoreOp::kDelete, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kDelete, timeout_);
    return r.u8() != 0;
  }

  bool check(const std::vector<std::string>& keys) override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kCheck)).strs(keys);
    auto reply = roundtrip(StoreOp::kCheck, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kCheck, timeout_);
    return r.u8() != 0;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (keys.empty()) return;
    WireWriter req;
    req.u8(uint8_t(StoreOp::kWait)).strs(keys).i64(timeout.count());
    auto reply = roundtrip(StoreOp::kWait, req, timeout + kServerReplyGrace);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kWait, timeout);
  }

  int64_t num_keys() override {
    WireWriter req;
    req.u8(uint8_t(StoreOp::kNumKeys));
    auto reply = roundtrip(StoreOp::kNumKeys, req, timeout_);
    WireReader r(reply.data(), reply.size());
    expect_ok(r, StoreOp::kNumKeys, timeout_);
    return r.i64();
  }

  // Counts this client in, and on the server side waits until `world_size` clients have.
  void join(int world_size, bool wait_for_all) {
    int64_t n = add(kJoinCounterKey, 1);
    set(joined_key(n), Bytes{1});
    if (!wait_for_all || world_size <= 0) return;
    try {
      wait({joined_key(world_size)}, timeout_);
    } catch (const TimeoutError&) {
      int64_t joined = add(kJoinCounterKey, 0);
      throw TimeoutError("TCPStore: only " + std::to_string(joined) + " of " + std::to_string(world_size) +
                         " clients joined " + endpoint() + " within " + std::to_string(timeout_.count()) + " ms");
    }
  }

 private:
  std::string endpoint() const { return host_ + ":" + std::to_string(port_); }

  // Sends one request and returns the reply payload. Any transport failure drops the connection
  // (its state is unknown) and the next request reconnects.
  std::vector<uint8_t> roundtrip(StoreOp op, WireWriter& req, std::chrono::milliseconds io_timeout) {
    const auto& frame = req.frame();
    std::lock_guard guard(mu_);
    if (fd_ < 0) fd_ = connect_with_retry(host_, port_, timeout_);
    const auto deadline = deadline_after(io_timeout);
    IoResult io = send_all(fd_, frame.data(), frame.size(), deadline);
    uint8_t header[kFrameHeaderBytes];
    if (io.status == IoStatus::kOk) io = recv_exact(fd_, header, sizeof(header), deadline);
    std::vector<uint8_t> payload;
    if (io.status == IoStatus::kOk) {
      uint32_t len = read_frame_length(header);
      if (len > kMaxFrameBytes || len == 0) {
        drop_connection();
        throw PeerError("TCPStore: malformed reply from " + endpoint() + " to " + op_name(op), -1);
      }
      payload.resize(len);
      io = recv_exact(fd_, payload.data(), len, deadline);
    }
    switch (io.status) {
      case IoStatus::kOk: return payload;
      case IoStatus::kTimeout:
        drop_connection();
        throw TimeoutError("TCPStore: no reply from " + endpoint() + " to " + op_name(op) + " within " +
                           std::to_string(io_timeout.count()) + " ms");
      case IoStatus::kClosed:
        drop_connection();
        throw PeerError("TCPStore: connection to " + endpoint() + " closed during " + op_name(op) +
                            (io.err ? ": " + errno_text(io.err) : std::string(" (server gone?)")),
                        -1);
      case IoStatus::kError: break;
    }
    drop_connection();
    throw PeerError("TCPStore: " + std::string(op_name(op)) + " to " + endpoint() + " failed: " + errno_text(io.err), -1);
  }

  void drop_connection() {
    ::close(fd_);
    fd_ = -1;
  }

  // Reads the reply status; turns TIMEOUT and INVALID replies into the matching exceptions.
  void expect_ok(WireReader& r, StoreOp op, std::chrono::milliseconds wait_timeout) {
    try {
      auto status = static_cast<ReplyStatus>(r.u8());
      switch (status) {
        case ReplyStatus::kOk: return;
        case ReplyStatus::kTimeout:
          throw_wait_timeout("TCPStore(" + endpoint() + ")", r.strs(), wait_timeout);
        case ReplyStatus::kInvalidArgument: throw InvalidArgument(r.str());
      }
    } catch (const TimeoutError&) {
      throw;
    } catch (const InvalidArgument&) {
      throw;
    } catch (const Error& e) {
      throw PeerError("TCPStore: malformed reply from " + endpoint() + " to " + op_name(op) + ": " + e.what(), -1);
    }
    throw PeerError("TCPStore: unknown reply status from " + endpoint() + " to " + op_name(op), -1);
  }

  std::unique_ptr<TcpStoreServerCore> server_;  // declared first: destroyed after the client
  std::mutex mu_;  // one request at a time on the connection
  std::string host_;
  uint16_t port_;
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
  uint16_t port = opts.port;
  if (opts.is_server) {
    server = TcpStoreServerCore::start(opts.host, opts.port);
    port = server->port();
  }
  auto client = std::make_shared<TcpStoreClient>(opts.host, port, opts.timeout, std::move(server));
  client->join(opts.world_size, opts.is_server);
  return client;
}

std::unique_ptr<TCPStoreServer> TCPStoreServer::start(const std::string& host, uint16_t port) {
  return std::make_unique<StandaloneServer>(TcpStoreServerCore::start(host, port));
}

}  // namespace kolo
