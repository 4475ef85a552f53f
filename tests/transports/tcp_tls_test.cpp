// TLS on the TCP transport (KOLO_TLS=1, common/tls.hpp), over real loopback
// sockets. Sessions: bytes cross intact under the pre-shared key and under certificates, and
// when a sealed record meets a full socket and waits; a wrong
// secret, a certificate from another CA, a TLS 1.2 offer and a peer speaking kolo frames in
// clear each fail the handshake with an error that names the peer's address; a tampered record
// and a record cut in half are refused with nothing of them delivered (the same record
// untampered is delivered, so the capture itself is sound). Groups: hostile callers that know
// the secret but fail TLS in each of those ways are refused and the real peer still connects
// and moves data; settings that cannot work are refused before anything connects.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "tls_certs.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_device.hpp"
#include "common/tls.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

using namespace kolo;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Conn {
  tcp::Fd client, server;
};

// A connected loopback TCP connection, both ends non-blocking.
Conn loopback() {
  tcp::Endpoint ep;
  tcp::Fd listener = tcp::listen_any_port("127.0.0.1", &ep);
  Conn c;
  c.client = tcp::connect_until(ep, Clock::now() + 5s);
  std::string from;
  c.server = tcp::accept_until(listener.get(), Clock::now() + 5s, &from);
  tcp::set_nonblocking(c.client.get());
  tcp::set_nonblocking(c.server.get());
  return c;
}

transport::auth::Secret secret_of(const std::string& text) { return transport::auth::derive_secret(text); }

TlsSettings psk() {
  TlsSettings s;
  s.on = true;
  s.secret_given = true;
  return s;
}

TlsSettings certs(const kolo::testing::TestPki& trust, const kolo::testing::TestPki::Files& mine) {
  TlsSettings s;
  s.on = true;
  s.cert = mine.cert;
  s.key = mine.key;
  s.ca = trust.ca_file();
  return s;
}

// Runs both handshakes (the server's on a thread); returns each side's error ("" if none).
std::pair<std::string, std::string> handshake_both(TlsSession& client, TlsSession& server) {
  std::string server_err, client_err;
  std::thread t([&] {
    try {
      server.handshake_until(Clock::now() + 5s, 0);
    } catch (const std::exception& e) {
      server_err = e.what();
    }
  });
  try {
    client.handshake_until(Clock::now() + 5s, 1);
  } catch (const std::exception& e) {
    client_err = e.what();
  }
  t.join();
  return {client_err, server_err};
}

void wait_fd(int fd, short events) {
  pollfd p{fd, events, 0};
  ::poll(&p, 1, 100);
}

// Writes all of `data` through `s`, one record per call, waiting on EAGAIN.
void write_all(TlsSession& s, int fd, const std::vector<char>& data) {
  size_t done = 0;
  const auto deadline = Clock::now() + 10s;
  while (done < data.size()) {
    ASSERT_LT(Clock::now(), deadline);
    iovec iov{const_cast<char*>(data.data()) + done, data.size() - done};
    const ssize_t w = s.writev(&iov, 1);
    if (w > 0) {
      done += static_cast<size_t>(w);
    } else {
      ASSERT_EQ(errno, EAGAIN) << s.error();
      wait_fd(fd, POLLOUT);
    }
  }
}

// Reads through `s` until `want` bytes, the end of the stream, or an error; returns what came.
// *err gets the session's error, *eof whether the stream ended.
std::vector<char> read_upto(TlsSession& s, int fd, size_t want, std::string* err, bool* eof = nullptr,
                            std::chrono::milliseconds patience = 5000ms) {
  std::vector<char> got(want);
  size_t n = 0;
  const auto deadline = Clock::now() + patience;
  while (n < want && Clock::now() < deadline) {
    const ssize_t r = s.read(got.data() + n, want - n);
    if (r > 0) {
      n += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      if (eof) *eof = true;
      break;
    }
    if (errno != EAGAIN) {
      *err = s.error();
      break;
    }
    wait_fd(fd, POLLIN);
  }
  got.resize(n);
  return got;
}

// The raw bytes of `n` bytes on `fd` (a captured record), waiting for them.
std::vector<char> raw_read(int fd, size_t n) {
  std::vector<char> out(n);
  tcp::read_all_until(fd, out.data(), n, Clock::now() + 5s);
  return out;
}

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) % 251);
  return v;
}

// A TLS 1.3 record of `n` plaintext bytes on the wire: 5-byte header, the bytes, the content
// type, the 16-byte AEAD tag.
constexpr size_t record_bytes(size_t n) { return 5 + n + 1 + 16; }

}  // namespace

TEST(TlsSessions, PreSharedKeyCarriesBytesIntactBothWays) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  TlsSession client(ctx, c.client.get(), true, "rank 1 at server"), server(ctx, c.server.get(), false, "rank 0 at client");
  auto [ce, se] = handshake_both(client, server);
  ASSERT_EQ(ce, "");
  ASSERT_EQ(se, "");
  const auto a = pattern(1 << 20, 1), b = pattern(300000, 2);
  std::thread t([&] { write_all(client, c.client.get(), a); });
  std::string err;
  const auto got = read_upto(server, c.server.get(), a.size(), &err);
  t.join();
  EXPECT_EQ(err, "");
  EXPECT_TRUE(got == a) << "1 MiB client -> server differs (" << got.size() << " bytes came)";
  std::thread u([&] { write_all(server, c.server.get(), b); });
  const auto back = read_upto(client, c.client.get(), b.size(), &err);
  u.join();
  EXPECT_TRUE(back == b);
}

TEST(TlsSessions, CertificatesOfTheTrustedCaAreAccepted) {
  kolo::testing::TestPki pki("kolo-test-ca");
  const auto s = pki.issue("rank-a"), k = pki.issue("rank-b");
  TlsContext cs(certs(pki, s), secret_of("unused")), ck(certs(pki, k), secret_of("unused"));
  Conn c = loopback();
  TlsSession client(ck, c.client.get(), true, "rank 1"), server(cs, c.server.get(), false, "rank 0");
  auto [ce, se] = handshake_both(client, server);
  EXPECT_EQ(ce, "");
  EXPECT_EQ(se, "");
  const auto a = pattern(70000, 3);
  write_all(client, c.client.get(), a);
  std::string err;
  EXPECT_TRUE(read_upto(server, c.server.get(), a.size(), &err) == a) << err;
}

TEST(TlsSessions, WrongSecretFailsTheHandshakeNamingThePeer) {
  TlsContext mine(psk(), secret_of("job")), theirs(psk(), secret_of("another job"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  ASSERT_NE(who.find("127.0.0.1:"), std::string::npos) << who;
  TlsSession client(theirs, c.client.get(), true, "rank 1"), server(mine, c.server.get(), false, who);
  auto [ce, se] = handshake_both(client, server);
  EXPECT_NE(ce, "");
  ASSERT_NE(se, "") << "a peer with another secret finished the handshake";
  EXPECT_NE(se.find(who), std::string::npos) << se;
}

TEST(TlsSessions, CertificateFromAnotherCaIsRefused) {
  kolo::testing::TestPki pki("kolo-test-ca"), stranger("someone-else");
  const auto s = pki.issue("rank-a"), k = stranger.issue("intruder");
  // The intruder trusts our CA (so it would accept us) but shows a certificate we cannot trust.
  TlsContext cs(certs(pki, s), secret_of("x")), ck(certs(pki, k), secret_of("x"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  TlsSession client(ck, c.client.get(), true, "rank 1"), server(cs, c.server.get(), false, who);
  auto [ce, se] = handshake_both(client, server);
  ASSERT_NE(se, "") << "a certificate from another CA was accepted";
  EXPECT_NE(se.find(who), std::string::npos) << se;
  EXPECT_NE(se.find("certificate"), std::string::npos) << se;
  // TLS 1.3: the client learns of it at its first read (the server's alert), not in its handshake.
  std::string err;
  bool eof = false;
  const auto got = read_upto(client, c.client.get(), 1, &err, &eof);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(!err.empty() || eof);
}

TEST(TlsSessions, Tls12OfferIsRefused) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  TlsSession server(ctx, c.server.get(), false, who);
  std::string server_err;
  std::thread t([&] {
    try {
      server.handshake_until(Clock::now() + 5s, 0);
    } catch (const std::exception& e) {
      server_err = e.what();
    }
  });
  // An old client: TLS 1.2 at most, with a PSK of the same secret it cannot use there.
  SSL_CTX* old = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(old, TLS1_2_VERSION);
  SSL* ssl = SSL_new(old);
  SSL_set_fd(ssl, c.client.get());
  int ret = -1;
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    ret = SSL_connect(ssl);
    const int e = SSL_get_error(ssl, ret);
    if (ret == 1 || (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)) break;
    wait_fd(c.client.get(), e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
  }
  t.join();
  EXPECT_NE(ret, 1) << "a TLS 1.2 client completed a handshake";
  SSL_free(ssl);
  SSL_CTX_free(old);
  ASSERT_NE(server_err, "");
  EXPECT_NE(server_err.find(who), std::string::npos) << server_err;
  EXPECT_NE(server_err.find("protocol"), std::string::npos) << server_err;
}

TEST(TlsSessions, PeerSpeakingFramesInClearIsRefused) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  TlsSession server(ctx, c.server.get(), false, who);
  tcp::FrameHeader h{};
  h.kind = tcp::FrameKind::data;
  h.bytes = 64;
  const auto payload = pattern(64, 9);
  tcp::write_all_until(c.client.get(), &h, sizeof h, Clock::now() + 5s);
  tcp::write_all_until(c.client.get(), payload.data(), payload.size(), Clock::now() + 5s);
  std::string err;
  try {
    server.handshake_until(Clock::now() + 5s, 0);
  } catch (const std::exception& e) {
    err = e.what();
  }
  ASSERT_NE(err, "") << "clear frames passed for a TLS handshake";
  EXPECT_NE(err.find(who), std::string::npos) << err;
  EXPECT_NE(err.find("KOLO_TLS=1"), std::string::npos) << "the error should say what is likely wrong: " << err;
}

// A record the socket has no room for waits in the session (write_pending) and goes first on
// the next call, which offers the same bytes again (the pair rebuilds its iovecs from the
// offsets reported). Small socket buffers and no reader at first make the wait certain; the
// frame is offered as the pair offers it (a 40-byte header, then the payload), and must arrive
// intact and in order.
TEST(TlsSessions, SealedRecordsThatMeetAFullSocketWaitAndArriveInOrder) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  tcp::tune_data_socket(c.client.get(), 64 * 1024);
  tcp::tune_data_socket(c.server.get(), 64 * 1024);
  TlsSession client(ctx, c.client.get(), true, "rank 1"), server(ctx, c.server.get(), false, "rank 0");
  auto [ce, se] = handshake_both(client, server);
  ASSERT_EQ(ce + se, "");
  const auto head = pattern(40, 7), body = pattern(3 << 20, 8);
  std::vector<char> whole(head);
  whole.insert(whole.end(), body.begin(), body.end());
  size_t done = 0;
  bool waited = false;
  std::vector<char> got;
  std::string err;
  std::thread reader;
  const auto deadline = Clock::now() + 10s;
  while (done < whole.size()) {
    ASSERT_LT(Clock::now(), deadline);
    iovec iov[2];
    int n = 0;
    if (done < head.size()) iov[n++] = {const_cast<char*>(head.data()) + done, head.size() - done};
    const size_t body_done = done > head.size() ? done - head.size() : 0;
    iov[n++] = {const_cast<char*>(body.data()) + body_done, body.size() - body_done};
    const ssize_t w = client.writev(iov, n);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    ASSERT_EQ(errno, EAGAIN) << client.error();
    if (!waited) {
      // The first time the socket is full: sealed records wait, and the reader starts only now.
      EXPECT_TRUE(client.write_pending());
      waited = true;
      reader = std::thread([&] { got = read_upto(server, c.server.get(), whole.size(), &err); });
    }
    wait_fd(c.client.get(), POLLOUT);
  }
  EXPECT_FALSE(client.write_pending());
  if (reader.joinable()) reader.join();
  EXPECT_TRUE(waited) << "the socket never filled: the waiting records were not exercised";
  EXPECT_EQ(err, "");
  EXPECT_TRUE(got == whole) << got.size() << " of " << whole.size() << " bytes came, or they differ";
}

// Records captured off the wire (the server's socket read raw) and sent again by the test
// straight into the client's socket: the first intact, which the server accepts, the second
// with one bit flipped, which it must refuse with nothing of it delivered.
TEST(TlsSessions, TamperedRecordIsRefusedAndNothingOfItDelivered) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  TlsSession client(ctx, c.client.get(), true, "rank 1"), server(ctx, c.server.get(), false, who);
  auto [ce, se] = handshake_both(client, server);
  ASSERT_EQ(ce + se, "");
  const auto first = pattern(1000, 4), second = pattern(1000, 5);
  write_all(client, c.client.get(), first);
  std::vector<char> rec = raw_read(c.server.get(), record_bytes(first.size()));
  tcp::write_all_until(c.client.get(), rec.data(), rec.size(), Clock::now() + 5s);
  std::string err;
  EXPECT_TRUE(read_upto(server, c.server.get(), first.size(), &err) == first) << "the intact record was not delivered: " << err;

  write_all(client, c.client.get(), second);
  rec = raw_read(c.server.get(), record_bytes(second.size()));
  rec[5 + 500] ^= 0x01;  // one bit of the ciphertext
  tcp::write_all_until(c.client.get(), rec.data(), rec.size(), Clock::now() + 5s);
  const auto got = read_upto(server, c.server.get(), second.size(), &err);
  EXPECT_TRUE(got.empty()) << got.size() << " bytes of a tampered record were delivered";
  ASSERT_NE(err, "") << "a tampered record was not refused";
  EXPECT_NE(err.find(who), std::string::npos) << err;
}

TEST(TlsSessions, RecordCutInHalfIsRefused) {
  TlsContext ctx(psk(), secret_of("job"));
  Conn c = loopback();
  const std::string who = tls_peer_name("rank 0", c.server.get());
  TlsSession client(ctx, c.client.get(), true, "rank 1"), server(ctx, c.server.get(), false, who);
  auto [ce, se] = handshake_both(client, server);
  ASSERT_EQ(ce + se, "");
  const auto data = pattern(4000, 6);
  write_all(client, c.client.get(), data);
  const std::vector<char> rec = raw_read(c.server.get(), record_bytes(data.size()));
  tcp::write_all_until(c.client.get(), rec.data(), rec.size() / 2, Clock::now() + 5s);
  ::shutdown(c.client.get(), SHUT_WR);
  std::string err;
  bool eof = false;
  const auto got = read_upto(server, c.server.get(), data.size(), &err, &eof);
  EXPECT_TRUE(got.empty()) << got.size() << " bytes of half a record were delivered";
  EXPECT_FALSE(eof) << "half a record then the end read as an orderly end of stream";
  EXPECT_NE(err.find("cut short"), std::string::npos) << err;
  EXPECT_NE(err.find(who), std::string::npos) << err;
}

// ---- Groups: hostile callers at a forming group's port (as tests/engine/hostile_peer_test.cpp)

namespace {

struct Sink : transport::FailureSink {
  void peer_failed(int, transport::Failure, const std::string&) override {}
};

transport::Bootstrap boot(Store& store, int rank, Sink* sink) {
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = "tls";
  b.rank = rank;
  b.size = 2;
  b.secret = secret_of("the real job");
  b.deadline = Clock::now() + 30s;
  b.listen_addr = "127.0.0.1";
  b.failures = sink;
  return b;
}

// A caller that knows the secret: its hello (claiming rank 0) passes; returns the connection
// and the acceptor's verdict.
tcp::Fd hello_as_rank0(Store& store, bool tls_flag, tcp::HelloStatus* verdict) {
  const std::string info = store.get_string("tls/tcp/1");
  const auto hash = info.rfind('#');
  transport::auth::Nonce peer_nonce{};
  EXPECT_TRUE(transport::auth::from_hex(info.substr(hash + 1), &peer_nonce));
  tcp::Fd fd = tcp::connect_until(tcp::parse_endpoint(info.substr(0, hash)), Clock::now() + 5s);
  Sink s;
  transport::Bootstrap b = boot(store, 0, &s);
  tcp::send_hello(fd.get(), b, 1, peer_nonce, tls_flag);
  tcp::HelloReply r{};
  tcp::read_all_until(fd.get(), &r, sizeof r, Clock::now() + 15s);
  *verdict = r.status;
  tcp::set_nonblocking(fd.get());
  return fd;
}

// The client side of a hostile TLS attempt: true when the handshake, or the first read after it
// (TLS 1.3 clients finish before the server has checked them), fails or finds the end.
bool refused(TlsSession& s, int fd) {
  try {
    s.handshake_until(Clock::now() + 5s, 1);
  } catch (const std::exception&) {
    return true;
  }
  std::string err;
  bool eof = false;
  const auto got = read_upto(s, fd, 1, &err, &eof);
  return got.empty() && (!err.empty() || eof);
}

// Real rank 0 connects with `mine`; then one message each way must arrive intact.
void real_rank0_moves_data(Store& store, const TlsSettings& mine, std::unique_ptr<tcp::TcpDevice>& d1, std::thread& acceptor,
                           const std::string& err1) {
  Sink s0;
  std::unique_ptr<tcp::TcpDevice> d0 = tcp::TcpDevice::connect_device(boot(store, 0, &s0), {1}, mine);
  acceptor.join();
  ASSERT_EQ(err1, "");
  ASSERT_NE(d1, nullptr);
  const auto a = pattern(200000, 7), b = pattern(5000, 8);
  std::vector<char> ga(a.size()), gb(b.size());
  transport::Request sa, ra, sb, rb;
  transport::Tag t{};
  d0->pair(1)->post_send(a.data(), a.size(), t, &sa);
  d1->pair(0)->post_recv(ga.data(), ga.size(), t, &ra);
  d1->pair(0)->post_send(b.data(), b.size(), t, &sb);
  d0->pair(1)->post_recv(gb.data(), gb.size(), t, &rb);
  const auto deadline = Clock::now() + 10s;
  auto pending = [](transport::Request& r) { return r.state == transport::Request::State::pending; };
  while ((pending(sa) || pending(ra) || pending(sb) || pending(rb)) && Clock::now() < deadline) {
    d0->poll();
    d1->poll();
  }
  EXPECT_EQ(ra.state, transport::Request::State::done) << ra.detail;
  EXPECT_EQ(rb.state, transport::Request::State::done) << rb.detail;
  EXPECT_TRUE(ga == a);
  EXPECT_TRUE(gb == b);
}

}  // namespace

TEST(TlsGroups, CallersThatFailTlsAreRefusedAndTheGroupStillForms) {
  auto store = make_hash_store();
  Sink s1;
  std::unique_ptr<tcp::TcpDevice> d1;
  std::string err1;
  std::thread acceptor([&] {
    try {
      d1 = tcp::TcpDevice::connect_device(boot(*store, 1, &s1), {0}, psk());
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  store->get_string("tls/tcp/1");  // listening
  tcp::HelloStatus st{};
  {  // a rank without KOLO_TLS=1: refused at the hello, which says why
    tcp::Fd fd = hello_as_rank0(*store, false, &st);
    EXPECT_EQ(st, tcp::HelloStatus::tls_mismatch);
  }
  {  // says TLS, then offers TLS 1.2 only
    tcp::Fd fd = hello_as_rank0(*store, true, &st);
    ASSERT_EQ(st, tcp::HelloStatus::ok);
    SSL_CTX* old = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(old, TLS1_2_VERSION);
    SSL* ssl = SSL_new(old);
    SSL_set_fd(ssl, fd.get());
    int ret = -1;
    for (auto until = Clock::now() + 5s; Clock::now() < until;) {
      ret = SSL_connect(ssl);
      const int e = SSL_get_error(ssl, ret);
      if (ret == 1 || (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)) break;
      wait_fd(fd.get(), POLLIN);
    }
    EXPECT_NE(ret, 1);
    SSL_free(ssl);
    SSL_CTX_free(old);
  }
  {  // says TLS, then speaks frames in clear
    tcp::Fd fd = hello_as_rank0(*store, true, &st);
    ASSERT_EQ(st, tcp::HelloStatus::ok);
    tcp::FrameHeader h{};
    h.kind = tcp::FrameKind::data;
    tcp::write_all_until(fd.get(), &h, sizeof h, Clock::now() + 5s);
    // The acceptor hangs up (it does not wait out its 10 s for a ClientHello).
    char b;
    ssize_t r = -1;
    for (auto until = Clock::now() + 5s; Clock::now() < until;) {
      r = ::recv(fd.get(), &b, 1, 0);
      if (r >= 0 || (errno != EAGAIN && errno != EINTR)) break;
      wait_fd(fd.get(), POLLIN);
    }
    EXPECT_LE(r, 0) << "the acceptor answered clear frames";
  }
  {  // says TLS, proves the hello's secret, but its TLS key is another job's
    tcp::Fd fd = hello_as_rank0(*store, true, &st);
    ASSERT_EQ(st, tcp::HelloStatus::ok);
    TlsContext wrong(psk(), secret_of("another job"));
    TlsSession s(wrong, fd.get(), true, "rank 1");
    EXPECT_TRUE(refused(s, fd.get())) << "the acceptor kept a caller with another job's key";
  }
  real_rank0_moves_data(*store, psk(), d1, acceptor, err1);
}

TEST(TlsGroups, StrangersCertificateIsRefusedAndTheGroupStillForms) {
  kolo::testing::TestPki pki("kolo-job-ca"), stranger("another-ca");
  const auto r0 = pki.issue("rank0"), r1 = pki.issue("rank1"), evil = stranger.issue("intruder");
  auto store = make_hash_store();
  Sink s1;
  std::unique_ptr<tcp::TcpDevice> d1;
  std::string err1;
  std::thread acceptor([&] {
    try {
      d1 = tcp::TcpDevice::connect_device(boot(*store, 1, &s1), {0}, certs(pki, r1));
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  store->get_string("tls/tcp/1");
  {
    tcp::HelloStatus st{};
    tcp::Fd fd = hello_as_rank0(*store, true, &st);
    ASSERT_EQ(st, tcp::HelloStatus::ok);
    TlsContext bad(certs(pki, evil), secret_of("x"));
    TlsSession s(bad, fd.get(), true, "rank 1");
    EXPECT_TRUE(refused(s, fd.get())) << "the acceptor kept a caller with a stranger's certificate";
  }
  real_rank0_moves_data(*store, certs(pki, r0), d1, acceptor, err1);
}

TEST(TlsGroups, SettingsThatCannotWorkAreRefusedBeforeConnecting) {
  auto store = make_hash_store();
  Sink s;
  TlsSettings no_secret;
  no_secret.on = true;
  try {
    tcp::TcpDevice::connect_device(boot(*store, 0, &s), {1}, no_secret);
    ADD_FAILURE() << "KOLO_TLS=1 without a secret or certificates was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KOLO_SECRET"), std::string::npos) << e.what();
  }
  TlsSettings half = psk();
  half.cert = "/nonexistent/cert.pem";
  try {
    tcp::TcpDevice::connect_device(boot(*store, 0, &s), {1}, half);
    ADD_FAILURE() << "a certificate without its key and CA was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KOLO_TLS_KEY"), std::string::npos) << e.what();
  }
  kolo::testing::TestPki pki("kolo-job-ca");
  TlsSettings missing = certs(pki, pki.issue("rank0"));
  missing.key = "/nonexistent/key.pem";
  try {
    tcp::TcpDevice::connect_device(boot(*store, 0, &s), {1}, missing);
    ADD_FAILURE() << "a missing key file was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/key.pem"), std::string::npos) << e.what();
  }
}
