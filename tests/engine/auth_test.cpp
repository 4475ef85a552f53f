// The connection handshake's authentication (transports/common/auth.hpp, tcp/handshake.cpp):
// proofs depend on every bound field, the secret never crosses the wire, and a connector or an
// acceptor without the secret is refused on both ends.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/common/auth.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/socket.hpp"

using namespace kolo;
using namespace kolo::transport::auth;
using namespace std::chrono_literals;

namespace {

const Binding kBind{"tcp", 2, 0x1234, 0, 1, 2};

Nonce nonce_of(uint8_t v) {
  Nonce n{};
  n.fill(v);
  return n;
}

bool contains(const std::vector<uint8_t>& hay, const uint8_t* needle, size_t n) {
  return std::search(hay.begin(), hay.end(), needle, needle + n) != hay.end();
}

}  // namespace

TEST(Auth, SecretIsSha256OfTheText) {
  // SHA-256("abc"), FIPS 180-2 appendix B.1.
  const uint8_t want[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                            0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
  Secret s = derive_secret("abc");
  EXPECT_EQ(0, std::memcmp(s.data(), want, 32));
  EXPECT_NE(derive_secret("abc"), derive_secret("abd"));
}

TEST(Auth, ProofIsHmacSha256OverTheDocumentedLayout) {
  // Computed independently with Python's hmac/hashlib over the layout auth.cpp documents:
  // "kolo-auth-v1" | role | u32 len | transport | u32 version | u64 group | i32 x3 | nonces.
  const uint8_t want[32] = {0x96, 0x33, 0xdc, 0x2a, 0xe7, 0x1b, 0x2a, 0x3b, 0x2a, 0xba, 0xb6, 0xf2, 0x41, 0xfd, 0xbd, 0x29,
                            0x2b, 0xf6, 0x59, 0x02, 0x2e, 0x05, 0x29, 0x66, 0x05, 0xb8, 0x9d, 0x38, 0x0b, 0xb7, 0x23, 0x7e};
  Mac m = prove(derive_secret("job"), Role::connector, kBind, nonce_of(1), nonce_of(2));
  EXPECT_EQ(0, std::memcmp(m.data(), want, 32));
  EXPECT_FALSE(same(m, prove(derive_secret("jog"), Role::connector, kBind, nonce_of(1), nonce_of(2))));
}

TEST(Auth, ProofBindsEveryField) {
  const Secret k = derive_secret("job");
  const Mac base = prove(k, Role::connector, kBind, nonce_of(1), nonce_of(2));
  std::vector<Mac> variants;
  variants.push_back(prove(k, Role::acceptor, kBind, nonce_of(1), nonce_of(2)));
  variants.push_back(prove(k, Role::connector, kBind, nonce_of(3), nonce_of(2)));
  variants.push_back(prove(k, Role::connector, kBind, nonce_of(1), nonce_of(3)));
  variants.push_back(prove(k, Role::connector, kBind, nonce_of(2), nonce_of(1)));  // nonces swapped
  Binding b = kBind;
  b.transport = "shm";
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  b = kBind;
  b.protocol_version = 3;
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  b = kBind;
  b.group_hash ^= 1;
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  b = kBind;
  b.connector_rank = 5;
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  b = kBind;
  b.acceptor_rank = 5;
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  b = kBind;
  b.world_size = 3;
  variants.push_back(prove(k, Role::connector, b, nonce_of(1), nonce_of(2)));
  for (size_t i = 0; i < variants.size(); ++i) EXPECT_FALSE(same(base, variants[i])) << "variant " << i;
}

TEST(Auth, NoncesAreFreshAndHexRoundTrips) {
  Nonce a = fresh_nonce(), b = fresh_nonce();
  EXPECT_NE(a, b);
  Nonce back{};
  ASSERT_TRUE(from_hex(to_hex(a), &back));
  EXPECT_EQ(a, back);
  std::string abab;
  for (int i = 0; i < 16; ++i) abab += "ab";
  EXPECT_EQ(to_hex(nonce_of(0xab)), abab);
  EXPECT_FALSE(from_hex("", &back));
  EXPECT_FALSE(from_hex(std::string(31, 'a'), &back));
  EXPECT_FALSE(from_hex(std::string(33, 'a'), &back));
  EXPECT_FALSE(from_hex(std::string(30, 'a') + "zz", &back));
}

namespace {

// Runs one TCP handshake between a connector and an acceptor through a relay that records every
// byte both ways. Returns what each side reported.
struct Outcome {
  bool accepted = false;
  int peer = -1;
  std::string acceptor_why;
  std::string connector_error;
  std::vector<uint8_t> transcript;
};

Outcome handshake(const std::string& connector_secret, const std::string& acceptor_secret) {
  int a[2], c[2];
  EXPECT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM, 0, a));
  EXPECT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM, 0, c));
  auto store = make_hash_store();
  auto boot = [&](int rank, const std::string& text) {
    transport::Bootstrap b;
    b.store = store.get();
    b.prefix = "auth-test";
    b.rank = rank;
    b.size = 2;
    b.secret = derive_secret(text);
    b.deadline = std::chrono::steady_clock::now() + 5s;
    return b;
  };
  const transport::Bootstrap acceptor = boot(1, acceptor_secret), connector = boot(0, connector_secret);
  const Nonce published = fresh_nonce();
  Outcome out;
  std::mutex mu;
  std::atomic<bool> stop{false};
  // The relay: a[1] <-> c[1], recording both directions.
  std::thread relay([&] {
    char buf[4096];
    while (!stop) {
      bool moved = false;
      for (auto [from, to] : {std::pair{a[1], c[1]}, std::pair{c[1], a[1]}}) {
        ssize_t n = ::recv(from, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
          std::lock_guard<std::mutex> lk(mu);
          out.transcript.insert(out.transcript.end(), buf, buf + n);
          EXPECT_EQ(n, ::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL));
          moved = true;
        }
      }
      if (!moved) std::this_thread::sleep_for(100us);
    }
  });
  std::thread acc([&] {
    std::vector<bool> want = {true, false};
    out.accepted = tcp::accept_hello(a[0], acceptor, want, published, &out.peer, &out.acceptor_why);
  });
  try {
    Nonce sent = tcp::send_hello(c[0], connector, 1, published);
    tcp::expect_hello_reply(c[0], connector, 1, sent, published);
  } catch (const std::exception& e) {
    out.connector_error = e.what();
  }
  acc.join();
  stop = true;
  relay.join();
  for (int fd : {a[0], a[1], c[0], c[1]}) ::close(fd);
  return out;
}

}  // namespace

TEST(Auth, HandshakeWithTheSameSecretSucceedsAndNeverSendsIt) {
  const std::string text = "the-job-secret-text";
  Outcome o = handshake(text, text);
  EXPECT_TRUE(o.accepted) << o.acceptor_why;
  EXPECT_EQ(o.peer, 0);
  EXPECT_EQ(o.connector_error, "");
  ASSERT_GT(o.transcript.size(), sizeof(tcp::Hello));
  const Secret k = derive_secret(text);
  EXPECT_FALSE(contains(o.transcript, k.data(), k.size())) << "the derived secret is on the wire";
  EXPECT_FALSE(contains(o.transcript, k.data(), 8)) << "part of the derived secret is on the wire";
  EXPECT_FALSE(contains(o.transcript, reinterpret_cast<const uint8_t*>(text.data()), text.size())) << "KOLO_SECRET is on the wire";
}

TEST(Auth, ConnectorWithoutTheSecretIsRefusedOnBothSides) {
  Outcome o = handshake("wrong", "right");
  EXPECT_FALSE(o.accepted);
  EXPECT_NE(o.acceptor_why.find("wrong job secret"), std::string::npos) << o.acceptor_why;
  EXPECT_NE(o.acceptor_why.find("claims rank 0"), std::string::npos) << o.acceptor_why;
  EXPECT_NE(o.connector_error.find("refused"), std::string::npos) << o.connector_error;
  EXPECT_NE(o.connector_error.find("secret"), std::string::npos) << o.connector_error;
}

TEST(Auth, ReplayedHelloWithAnotherPublishedNonceIsRefused) {
  // A hello proves the secret only against the nonce the acceptor published for this setup: the
  // same bytes sent to a later setup (another nonce) are refused.
  int s[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM, 0, s));
  auto store = make_hash_store();
  transport::Bootstrap b;
  b.store = store.get();
  b.prefix = "auth-test";
  b.rank = 0;
  b.size = 2;
  b.secret = derive_secret("k");
  b.deadline = std::chrono::steady_clock::now() + 5s;
  const Nonce first = fresh_nonce(), later = fresh_nonce();
  tcp::send_hello(s[0], b, 1, first);
  transport::Bootstrap acceptor = b;
  acceptor.rank = 1;
  int peer = -1;
  std::string why;
  EXPECT_FALSE(tcp::accept_hello(s[1], acceptor, {true, false}, later, &peer, &why));
  EXPECT_NE(why.find("wrong job secret"), std::string::npos) << why;
  ::close(s[0]);
  ::close(s[1]);
}
