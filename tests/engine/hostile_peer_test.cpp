// Hostile input at a forming group's listening port (TCP transport, threads as ranks): random
// bytes, half a hello, a hello without the secret's proof, silent connections and a thousand
// connections at once arrive before the real peer. Every one is refused, none stalls the setup,
// and the real peers then connect and move data intact.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "kolo/version.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_device.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

using namespace kolo;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Sink : transport::FailureSink {
  void peer_failed(int, transport::Failure, const std::string&) override {}
};

transport::Bootstrap boot(Store& store, int rank, Sink* sink) {
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = "hostile";
  b.rank = rank;
  b.size = 2;
  b.secret = transport::auth::derive_secret("the real job");
  // Long enough that 1000 attackers would blow it if each could stall the acceptor for a moment.
  b.deadline = Clock::now() + 30s;
  b.listen_addr = "127.0.0.1";
  b.failures = sink;
  return b;
}

tcp::Fd dial(const tcp::Endpoint& ep) { return tcp::connect_until(ep, Clock::now() + 5s); }

// Reads the acceptor's HelloReply, or nothing if it hung up.
bool read_reply(int fd, tcp::HelloReply* r) {
  try {
    tcp::read_all_until(fd, r, sizeof *r, Clock::now() + 15s);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

TEST(HostilePeers, GarbageAtTheListeningPortIsRefusedAndTheGroupStillForms) {
  auto store = make_hash_store();
  Sink s0, s1;
  std::unique_ptr<transport::Device> d1;
  std::string err1;
  std::thread acceptor([&] {
    try {
      d1 = tcp::TcpDevice::connect(boot(*store, 1, &s1), {0});
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  const std::string info = store->get_string("hostile/tcp/1");
  const tcp::Endpoint ep = tcp::parse_endpoint(info.substr(0, info.rfind('#')));

  // Silent connections first: they stay open the whole time and must not block what follows.
  std::vector<tcp::Fd> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(dial(ep));

  std::mt19937_64 rng(42);
  {  // random bytes, more than a hello
    tcp::Fd fd = dial(ep);
    std::vector<uint8_t> junk(4096);
    for (auto& c : junk) c = static_cast<uint8_t>(rng());
    tcp::write_all_until(fd.get(), junk.data(), junk.size(), Clock::now() + 5s);
    tcp::HelloReply r{};
    if (read_reply(fd.get(), &r)) EXPECT_NE(r.status, tcp::HelloStatus::ok);
  }
  {  // half a hello, then hang up
    tcp::Fd fd = dial(ep);
    tcp::Hello h{};
    h.magic = tcp::kHelloMagic;
    tcp::write_all_until(fd.get(), &h, sizeof h / 2, Clock::now() + 5s);
  }
  {  // a well-formed hello claiming rank 0, but without the secret: its proof is made up
    tcp::Fd fd = dial(ep);
    tcp::Hello h{};
    h.magic = tcp::kHelloMagic;
    h.protocol_version = static_cast<uint32_t>(kProtocolVersion);
    h.group_hash = tcp::group_hash("hostile");
    h.src_rank = 0;
    h.dst_rank = 1;
    h.world_size = 2;
    for (auto& c : h.mac) c = static_cast<uint8_t>(rng());
    tcp::write_all_until(fd.get(), &h, sizeof h, Clock::now() + 5s);
    tcp::HelloReply r{};
    ASSERT_TRUE(read_reply(fd.get(), &r)) << "the acceptor hung up without a verdict";
    EXPECT_EQ(r.magic, tcp::kHelloMagic);
    EXPECT_EQ(r.status, tcp::HelloStatus::bad_secret);
  }
  {  // a hello with an absurd rank
    tcp::Fd fd = dial(ep);
    tcp::Hello h{};
    h.magic = tcp::kHelloMagic;
    h.protocol_version = static_cast<uint32_t>(kProtocolVersion);
    h.group_hash = tcp::group_hash("hostile");
    h.src_rank = 1 << 30;
    h.dst_rank = 1;
    h.world_size = 2;
    tcp::write_all_until(fd.get(), &h, sizeof h, Clock::now() + 5s);
    tcp::HelloReply r{};
    ASSERT_TRUE(read_reply(fd.get(), &r));
    EXPECT_EQ(r.status, tcp::HelloStatus::bad_rank);
  }
  {  // a thousand connections at once, each closed without a word
    std::vector<tcp::Fd> many;
    for (int i = 0; i < 1000; ++i) many.push_back(dial(ep));
  }

  // Now the real rank 0: the group forms well inside its timeout, and data moves.
  std::unique_ptr<transport::Device> d0 = tcp::TcpDevice::connect(boot(*store, 0, &s0), {1});
  acceptor.join();
  ASSERT_TRUE(d1) << err1;
  std::vector<uint32_t> out(100000), in(100000, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i * 2654435761u);
  transport::Tag t;
  t.w[0] = 1;
  transport::Request rs, rr;
  d0->pair(1)->post_send(out.data(), out.size() * 4, t, &rs);
  d1->pair(0)->post_recv(in.data(), in.size() * 4, t, &rr);
  const auto deadline = Clock::now() + 10s;
  while ((rs.state == transport::Request::State::pending || rr.state == transport::Request::State::pending) && Clock::now() < deadline) {
    d0->poll();
    d1->poll();
  }
  EXPECT_EQ(rs.state, transport::Request::State::done);
  EXPECT_EQ(rr.state, transport::Request::State::done);
  EXPECT_EQ(in, out);
}

namespace {

// Rank 1 is a real TcpDevice; rank 0 is a raw socket that completes the handshake (it holds the
// secret: an insider gone wrong, or a corrupted stream) and then sends `frame`.
struct RawPeerResult {
  transport::Request::State state = transport::Request::State::pending;
  transport::Failure failure = transport::Failure::none;
  std::string detail;
};

RawPeerResult send_raw_frame(const tcp::FrameHeader& frame) {
  auto store = make_hash_store();
  Sink s0, s1;
  std::unique_ptr<transport::Device> d1;
  std::thread acceptor([&] { d1 = tcp::TcpDevice::connect(boot(*store, 1, &s1), {0}); });
  const transport::Bootstrap b0 = boot(*store, 0, &s0);
  const std::string info = store->get_string("hostile/tcp/1");
  transport::auth::Nonce published{};
  EXPECT_TRUE(transport::auth::from_hex(info.substr(info.rfind('#') + 1), &published));
  tcp::Fd fd = dial(tcp::parse_endpoint(info.substr(0, info.rfind('#'))));
  auto sent = tcp::send_hello(fd.get(), b0, 1, published);
  tcp::expect_hello_reply(fd.get(), b0, 1, sent, published);
  acceptor.join();
  tcp::write_all_until(fd.get(), &frame, sizeof frame, Clock::now() + 5s);
  std::vector<uint8_t> buf(16);
  transport::Tag t;
  t.w[0] = 9;
  transport::Request r;
  d1->pair(0)->post_recv(buf.data(), buf.size(), t, &r);
  const auto deadline = Clock::now() + 10s;
  while (r.state == transport::Request::State::pending && Clock::now() < deadline) d1->poll();
  return {r.state, r.failure, r.detail};
}

}  // namespace

TEST(HostilePeers, FrameClaimingATerabytePayloadFailsTheReceiveWithoutAllocating) {
  tcp::FrameHeader h{};
  h.kind = tcp::FrameKind::data;
  h.bytes = uint64_t(1) << 40;
  h.tag[0] = 9;
  RawPeerResult r = send_raw_frame(h);
  EXPECT_EQ(r.state, transport::Request::State::failed);
  EXPECT_EQ(r.failure, transport::Failure::size_mismatch);
  EXPECT_NE(r.detail.find("rank 0"), std::string::npos) << r.detail;
}

TEST(HostilePeers, FrameOfUnknownKindFailsNamingThePeer) {
  tcp::FrameHeader h{};
  h.kind = static_cast<tcp::FrameKind>(77);
  h.bytes = 5;
  RawPeerResult r = send_raw_frame(h);
  EXPECT_EQ(r.state, transport::Request::State::failed);
  EXPECT_NE(r.detail.find("rank 0"), std::string::npos) << r.detail;
}
