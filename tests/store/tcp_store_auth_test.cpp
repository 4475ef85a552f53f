// kolo's store authentication (src/store/store_auth.hpp) over real loopback sockets: every op
// through an authenticated connection; clients without the secret, with another one, speaking
// plain c10d, replaying a captured proof, or sending garbage are refused (logged with their
// address) before any key is read or written, while an authenticated client goes on; a store
// that cannot prove the secret is refused by the client; and unauthenticated connections cannot
// make the server hold more than a handshake step.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "store/store_auth.hpp"
#include "store/tcp_store_server.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;
using store_detail::TcpStoreServerCore;
namespace auth = store_detail::auth;

constexpr const char* kSecret = "the job's secret";

std::shared_ptr<TCPStore> client_of(uint16_t port, const std::string& secret,
                                    TCPStore::Protocol protocol = TCPStore::Protocol::kAuto) {
  TCPStore::Options opts;
  opts.port = port;
  opts.timeout = Ms(5000);
  opts.secret = secret;
  opts.protocol = protocol;
  return TCPStore::create(opts);
}

std::unique_ptr<TcpStoreServerCore> auth_server() {
  return TcpStoreServerCore::start("127.0.0.1", 0, auth::derive_key(kSecret));
}

template <typename Ready>
bool eventually(Ready ready, Ms limit = Ms(3000)) {
  Stopwatch clock;
  while (!ready()) {
    if (clock.elapsed() > limit) return false;
    std::this_thread::sleep_for(Ms(5));
  }
  return true;
}

// A blocking loopback socket, for speaking the handshake (or anything else) by hand.
struct Raw {
  int fd = -1;
  explicit Raw(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) throw std::runtime_error("connect failed");
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Raw() { ::close(fd); }
  void send(const void* data, size_t n) const {
    ASSERT_EQ(::send(fd, data, n, MSG_NOSIGNAL), ssize_t(n));
  }
  void send(const std::vector<uint8_t>& v) const { send(v.data(), v.size()); }
  // True when exactly n bytes arrived.
  bool recv(void* data, size_t n) const {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(fd, static_cast<char*>(data) + got, n - got, 0);
      if (r <= 0) return false;
      got += size_t(r);
    }
    return true;
  }
  // True when the server hung up (EOF or reset) within 5 s, whatever it sent before.
  bool hung_up() const {
    char buf[256];
    for (;;) {
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
      if (r < 0) return false;  // timeout
    }
  }
};

// c10d's validated-dialect SET of user key `key` (with c10d's "/" prefix), by hand.
std::vector<uint8_t> c10d_validated_set(const std::string& key, const std::string& value) {
  std::vector<uint8_t> m = {0, 0xCE, 0xF7, 0x85, 0x3C};  // VALIDATE + magic
  m.push_back(1);                                          // SET
  auto put = [&](const std::string& s) {
    for (int i = 0; i < 8; ++i) m.push_back(uint8_t(uint64_t(s.size()) >> (8 * i)));
    m.insert(m.end(), s.begin(), s.end());
  };
  put("/" + key);
  put(value);
  return m;
}

TEST(TcpStoreAuth, EveryOpWorksOnAnAuthenticatedConnectionInBothDialects) {
  auto server = auth_server();
  for (auto protocol : {TCPStore::Protocol::kAuto, TCPStore::Protocol::kLegacy, TCPStore::Protocol::kValidated}) {
    SCOPED_TRACE(int(protocol));
    auto a = client_of(server->port(), kSecret, protocol);
    auto b = client_of(server->port(), kSecret, protocol);
    const std::string p = "p" + std::to_string(int(protocol)) + "/";
    a->set(p + "k", std::string("v"));
    EXPECT_EQ(b->get_string(p + "k"), "v");
    EXPECT_EQ(a->add(p + "n", 5), 5);
    EXPECT_EQ(b->add(p + "n", -2), 3);
    Bytes won = b->compare_set(p + "c", {}, Bytes{'x'});
    EXPECT_EQ(won, Bytes{'x'});
    EXPECT_TRUE(a->check({p + "k", p + "n", p + "c"}));
    EXPECT_FALSE(a->check({p + "absent"}));
    EXPECT_TRUE(a->delete_key(p + "c"));
    EXPECT_FALSE(b->check({p + "c"}));
    std::thread later([&] {
      std::this_thread::sleep_for(Ms(50));
      b->set(p + "late", std::string("1"));
    });
    a->wait({p + "late"}, Ms(3000));
    later.join();
    EXPECT_THROW(a->wait({p + "never"}, Ms(100)), TimeoutError);
    EXPECT_GE(a->num_keys(), 3);
  }
  EXPECT_EQ(server->refused_connections(), 0u);
  EXPECT_EQ(server->pending_authentications(), 0u);
}

TEST(TcpStoreAuth, HostedServerAuthenticatesItsOwnClientAndTheWorldSizeJoin) {
  const uint16_t port = unused_port();
  auto options = [&](bool is_server) {
    TCPStore::Options opts;
    opts.port = port;
    opts.is_server = is_server;
    opts.world_size = 2;
    opts.timeout = Ms(5000);
    opts.secret = kSecret;
    return opts;
  };
  std::shared_ptr<TCPStore> host;
  std::thread server_side([&] { host = TCPStore::create(options(true)); });  // waits for 2 joined
  auto joiner = TCPStore::create(options(false));
  server_side.join();
  ASSERT_TRUE(host);
  host->set("addr", std::string("10.0.0.1:1234"));
  EXPECT_EQ(joiner->get_string("addr"), "10.0.0.1:1234");
  // The hosted server requires authentication: a client without the secret reads nothing.
  TCPStore::Options plain = options(false);
  plain.secret.clear();
  plain.world_size = -1;
  plain.protocol = TCPStore::Protocol::kValidated;
  plain.timeout = Ms(1000);
  EXPECT_THROW(TCPStore::create(plain)->get_string("addr"), Error);
}

TEST(TcpStoreAuth, ClientsWithoutTheSecretOrWithAnotherAreRefusedAndLoggedWhileOthersGoOn) {
  auto server = auth_server();
  auto good = client_of(server->port(), kSecret);
  good->set("k", std::string("good"));

  testing::internal::CaptureStderr();
  // Another job's secret: the client finds the server's proof wrong and hangs up.
  EXPECT_THROW(
      {
        try {
          client_of(server->port(), "another job");
        } catch (const PeerError& e) {
          EXPECT_NE(std::string(e.what()).find("failed to prove the job secret"), std::string::npos) << e.what();
          throw;
        }
      },
      PeerError);
  ASSERT_TRUE(eventually([&] { return server->refused_connections() == 1; }));
  EXPECT_EQ(good->get_string("k"), "good");  // served in between

  // No secret at all: a plain c10d client. Its SET has no reply, so it may seem to succeed, but
  // the server hangs up before reading it, and the next request fails.
  std::shared_ptr<TCPStore> plain;
  try {
    plain = client_of(server->port(), "", TCPStore::Protocol::kValidated);
    plain->set("k", std::string("evil"));
    EXPECT_THROW(plain->get_string("k"), Error);
  } catch (const Error&) {
    // refused already while connecting: as good
  }
  ASSERT_TRUE(eventually([&] { return server->refused_connections() >= 2; }));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("refused unauthenticated client 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("hung up before authenticating"), std::string::npos) << log;
  EXPECT_NE(log.find("sent a c10d request"), std::string::npos) << log;
  EXPECT_EQ(good->get_string("k"), "good");
  good->set("k2", std::string("still served"));
  EXPECT_EQ(client_of(server->port(), kSecret)->get_string("k2"), "still served");
}

TEST(TcpStoreAuth, PlainC10dRequestsAreRefusedBeforeAnyKeyIsReadOrWritten) {
  auto server = auth_server();
  auto good = client_of(server->port(), kSecret);
  good->set("victim", std::string("original"));
  EXPECT_EQ(good->get_string("victim"), "original");  // answered: every request so far is counted
  const uint64_t served = server->requests_handled();

  {  // torch >= 2.1's opening: VALIDATE, then a SET, in one write
    Raw raw(server->port());
    raw.send(c10d_validated_set("victim", "overwritten"));
    EXPECT_TRUE(raw.hung_up());
  }
  {  // torch 1.13's: a legacy SET (code 0), and a legacy GET (code 2) of the key
    Raw raw(server->port());
    std::vector<uint8_t> get = {2, 7, 0, 0, 0, 0, 0, 0, 0, '/', 'v', 'i', 'c', 't', 'i', 'm'};
    raw.send(get);
    EXPECT_TRUE(raw.hung_up());
  }
  ASSERT_TRUE(eventually([&] { return server->refused_connections() == 2; }));
  EXPECT_EQ(server->requests_handled(), served) << "a request of an unauthenticated connection was served";
  EXPECT_EQ(good->get_string("victim"), "original");
}

TEST(TcpStoreAuth, ClientRefusesAStoreThatCannotProveTheSecret) {
  // A kolo store of another job.
  auto other = TcpStoreServerCore::start("127.0.0.1", 0, auth::derive_key("another job"));
  EXPECT_THROW(client_of(other->port(), kSecret), PeerError);
  // A store with no authentication (or torch's): it hangs up on the unknown request code.
  auto open_store = TcpStoreServerCore::start("127.0.0.1", 0);
  try {
    client_of(open_store->port(), kSecret);
    ADD_FAILURE() << "a client with a secret used an unauthenticated store";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer kolo's store authentication"), std::string::npos) << e.what();
  }
  EXPECT_EQ(open_store->requests_handled(), 0u);
  // An impostor that answers the hello with a made-up nonce and proof, then records what the
  // client says next: the client must say nothing (no proof, no request).
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  size_t said_after_reply = 0;
  std::thread impostor([&] {
    int c = ::accept(listener, nullptr, nullptr);
    uint8_t hello[auth::kClientHelloBytes];
    size_t got = 0;
    while (got < sizeof hello) {
      ssize_t r = ::recv(c, hello + got, sizeof hello - got, 0);
      if (r <= 0) break;
      got += size_t(r);
    }
    uint8_t reply[auth::kServerReplyBytes];
    std::mt19937 rng(7);
    for (auto& b : reply) b = uint8_t(rng());
    ::send(c, reply, sizeof reply, MSG_NOSIGNAL);
    char buf[256];
    ssize_t r;
    while ((r = ::recv(c, buf, sizeof buf, 0)) > 0) said_after_reply += size_t(r);
    ::close(c);
  });
  try {
    client_of(ntohs(addr.sin_port), kSecret);
    ADD_FAILURE() << "the client accepted an impostor";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to prove the job secret"), std::string::npos) << e.what();
  }
  impostor.join();
  ::close(listener);
  EXPECT_EQ(said_after_reply, 0u);
}

TEST(TcpStoreAuth, ACapturedProofIsUselessAgainstANewNonce) {
  auto server = auth_server();
  const auth::Key key = auth::derive_key(kSecret);
  const auth::Nonce nonce = auth::fresh_nonce();
  // A real client's exchange, as an eavesdropper records it.
  uint8_t reply1[auth::kServerReplyBytes];
  auth::Mac captured{};
  {
    Raw real(server->port());
    real.send(auth::client_hello(nonce));
    ASSERT_TRUE(real.recv(reply1, sizeof reply1));
    auto proof = auth::client_answer(key, nonce, reply1);
    ASSERT_TRUE(proof.has_value());
    captured = *proof;
    real.send(captured.data(), captured.size());
    // Authenticated: a PING (validated dialect) is answered.
    const uint8_t ping[] = {0, 0xCE, 0xF7, 0x85, 0x3C, 13, 1, 2, 3, 4};
    real.send(ping, sizeof ping);
    uint8_t echo[4];
    ASSERT_TRUE(real.recv(echo, sizeof echo));
    EXPECT_EQ(echo[0], 1);
  }
  // The eavesdropper replays the same hello and the captured proof: the server's nonce differs.
  Raw replay(server->port());
  replay.send(auth::client_hello(nonce));
  uint8_t reply2[auth::kServerReplyBytes];
  ASSERT_TRUE(replay.recv(reply2, sizeof reply2));
  EXPECT_NE(std::memcmp(reply1, reply2, auth::kNonceBytes), 0) << "the server reused its nonce";
  testing::internal::CaptureStderr();
  replay.send(captured.data(), captured.size());
  EXPECT_TRUE(replay.hung_up());
  ASSERT_TRUE(eventually([&] { return server->refused_connections() == 1; }));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("wrong proof of the job secret"), std::string::npos);
  // And a captured server reply is useless to an impostor server: it answers another nonce.
  EXPECT_FALSE(auth::client_answer(key, auth::fresh_nonce(), reply1).has_value());
  // A server's proof reflected back as a client's proof fails too (the role is in the MAC).
  Raw reflect(server->port());
  reflect.send(auth::client_hello(nonce));
  uint8_t reply3[auth::kServerReplyBytes];
  ASSERT_TRUE(reflect.recv(reply3, sizeof reply3));
  reflect.send(reply3 + auth::kNonceBytes, auth::kMacBytes);
  EXPECT_TRUE(reflect.hung_up());
}

TEST(TcpStoreAuth, UnauthenticatedConnectionsCannotMakeTheServerHoldMore) {
  auto server = auth_server();
  auto good = client_of(server->port(), kSecret);
  good->set("k", std::string("v"));
  // A legacy SET claiming a 2^40-byte value: refused on its first byte, nothing allocated.
  {
    Raw raw(server->port());
    std::vector<uint8_t> huge = {0, 1, 0, 0, 0, 0, 0, 0, 0, 'k', 0, 0, 0, 0, 0, 1, 0, 0};
    raw.send(huge);
    EXPECT_TRUE(raw.hung_up());
  }
  // A correct hello followed by 16 MiB: the server reads the hello and then only the 32 bytes a
  // proof takes, finds them wrong and hangs up; the rest is never read into memory.
  {
    Raw raw(server->port());
    std::vector<uint8_t> flood = auth::client_hello(auth::fresh_nonce());
    flood.resize(flood.size() + (16u << 20), 0x5a);
    std::thread sender([&] { ::send(raw.fd, flood.data(), flood.size(), MSG_NOSIGNAL); });
    EXPECT_TRUE(raw.hung_up());
    ::shutdown(raw.fd, SHUT_RDWR);
    sender.join();
  }
  ASSERT_TRUE(eventually([&] { return server->refused_connections() == 2; }));
  // A crowd of silent connections: at most kMaxPendingAuth are held; the oldest go, and an
  // authenticated client is served throughout.
  std::vector<std::unique_ptr<Raw>> crowd;
  for (size_t i = 0; i < TcpStoreServerCore::kMaxPendingAuth + 40; ++i) crowd.push_back(std::make_unique<Raw>(server->port()));
  ASSERT_TRUE(eventually([&] { return server->refused_connections() >= 2 + 40; }));
  EXPECT_LE(server->pending_authentications(), TcpStoreServerCore::kMaxPendingAuth);
  EXPECT_EQ(client_of(server->port(), kSecret)->get_string("k"), "v");
  EXPECT_EQ(good->get_string("k"), "v");
  crowd.clear();
  EXPECT_TRUE(eventually([&] { return server->pending_authentications() == 0; }));
}

// A connection that stops halfway through the handshake (here: after the hello, never sending
// its proof) is refused at the deadline, and one that sends nothing too.
TEST(TcpStoreAuth, SlowHandshakesAreRefusedAtTheDeadline) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0, auth::derive_key(kSecret), Ms(300));
  Raw silent(server->port());
  Raw half(server->port());
  half.send(auth::client_hello(auth::fresh_nonce()));
  uint8_t reply[auth::kServerReplyBytes];
  ASSERT_TRUE(half.recv(reply, sizeof reply));
  testing::internal::CaptureStderr();
  Stopwatch clock;
  EXPECT_TRUE(silent.hung_up());
  EXPECT_TRUE(half.hung_up());
  EXPECT_GE(clock.elapsed(), Ms(150));
  ASSERT_TRUE(eventually([&] { return server->refused_connections() == 2; }));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("did not authenticate within 300 ms"), std::string::npos);
  EXPECT_EQ(server->pending_authentications(), 0u);
  EXPECT_EQ(client_of(server->port(), kSecret)->num_keys(), 0);
}

// The handshake's state machine alone: however its input is cut, it asks for no more than one
// step's bytes, and the right answers in any chunking authenticate.
TEST(TcpStoreAuth, ServerHandshakeAsksForOneStepAtATime) {
  const auth::Key key = auth::derive_key(kSecret);
  const auth::Nonce server_nonce = auth::fresh_nonce(), client_nonce = auth::fresh_nonce();
  for (size_t chunk : {size_t(1), size_t(3), size_t(64)}) {
    auth::ServerHandshake hs(key, server_nonce);
    std::vector<uint8_t> out;
    std::string why;
    auto hello = auth::client_hello(client_nonce);
    size_t pos = 0;
    while (pos < hello.size()) {
      ASSERT_LE(hs.wanted(), auth::kMacBytes);
      size_t n = std::min({chunk, hs.wanted(), hello.size() - pos});
      ASSERT_EQ(hs.feed(hello.data() + pos, n, out, why), auth::ServerHandshake::Step::kNeedMore) << why;
      pos += n;
    }
    ASSERT_EQ(out.size(), auth::kServerReplyBytes);
    uint8_t reply[auth::kServerReplyBytes];
    std::memcpy(reply, out.data(), sizeof reply);
    auto proof = auth::client_answer(key, client_nonce, reply);
    ASSERT_TRUE(proof.has_value());
    EXPECT_EQ(hs.wanted(), auth::kMacBytes);
    auto step = auth::ServerHandshake::Step::kNeedMore;
    for (pos = 0; pos < proof->size();) {
      size_t n = std::min({chunk, hs.wanted(), proof->size() - pos});
      step = hs.feed(proof->data() + pos, n, out, why);
      pos += n;
    }
    EXPECT_EQ(step, auth::ServerHandshake::Step::kDone);
    EXPECT_TRUE(hs.done());
    EXPECT_EQ(hs.wanted(), 0u);
  }
  // A wrong magic is refused as soon as the magic is complete.
  auth::ServerHandshake hs(key, server_nonce);
  std::vector<uint8_t> out;
  std::string why;
  const uint8_t bad[] = {auth::kAuthCode, 'X', 'S', 'A', '1'};
  EXPECT_EQ(hs.feed(bad, sizeof bad, out, why), auth::ServerHandshake::Step::kRefused);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kolo
