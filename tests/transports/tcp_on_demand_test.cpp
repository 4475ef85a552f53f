// The TCP transport's connections on demand (KOLO_CONNECT=lazy, transports/tcp/on_demand.hpp),
// threads as ranks: a rank opens only the connections it uses (counted in /proc/self/fd), both
// ranks dialling each other at once end with one connection and intact data whichever way the
// race goes (forced both ways with a hand-played peer, then left to chance many times), and a
// peer that died before anyone connected to it is named at once instead of waited for.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "kolo/store.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_device.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"
#include "open_sockets.hpp"
#include "failure_recorder.hpp"

using namespace kolo;
using namespace std::chrono_literals;
using transport::Failure;
using transport::Request;
using Clock = std::chrono::steady_clock;

namespace {

using Sink = kolo::testing::FailureRecorder;

transport::Bootstrap boot(Store& store, int rank, int size, Sink* sink) {
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = "lazy";
  b.rank = rank;
  b.size = size;
  b.secret = transport::auth::derive_secret("lazy job");
  b.deadline = Clock::now() + 10s;
  b.listen_addr = "127.0.0.1";
  b.failures = sink;
  b.connect_lazily = true;
  return b;
}

using kolo::testing_support::open_sockets;

struct World {
  std::shared_ptr<Store> store = make_hash_store();
  std::vector<std::unique_ptr<Sink>> sinks;
  std::vector<std::unique_ptr<transport::Device>> devs;
  explicit World(int size) {
    for (int r = 0; r < size; ++r) {
      sinks.push_back(std::make_unique<Sink>());
      std::vector<int> peers;
      for (int p = 0; p < size; ++p)
        if (p != r) peers.push_back(p);
      devs.push_back(tcp::TcpDevice::connect(boot(*store, r, size, sinks.back().get()), peers));
    }
  }
  // Polls every device (from this one thread) for at least `at_least` and until this process
  // holds `sockets` sockets (or 5 s pass): lets answers in flight land (a dial that lost a race
  // closes once its answer arrives). Returns the count it ended with.
  int settle(std::chrono::milliseconds at_least, int sockets) {
    const auto start = Clock::now();
    for (;;) {
      for (auto& dev : devs)
        if (dev) dev->poll();
      const auto now = Clock::now();
      if (now >= start + at_least && (open_sockets() == sockets || now >= start + 5s)) return open_sockets();
      std::this_thread::sleep_for(100us);
    }
  }
};

// Every rank of `w` sends one int to each peer in `to[rank]` and receives one from each rank
// that sends to it, all at once (a thread per rank, released together), and checks the values.
void talk(World& w, const std::vector<std::vector<int>>& to) {
  const int n = static_cast<int>(w.devs.size());
  std::atomic<int> ready{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      std::vector<int> out(static_cast<size_t>(n)), in(static_cast<size_t>(n), -1);
      std::deque<Request> reqs;
      ++ready;
      while (ready.load() < n) std::this_thread::yield();
      for (int p : to[static_cast<size_t>(r)]) {
        out[static_cast<size_t>(p)] = r * 100 + p;
        reqs.emplace_back();
        w.devs[static_cast<size_t>(r)]->pair(p)->post_send(&out[static_cast<size_t>(p)], sizeof(int), transport::Tag{}, &reqs.back());
      }
      std::vector<int> from;
      for (int q = 0; q < n; ++q)
        for (int p : to[static_cast<size_t>(q)])
          if (p == r) from.push_back(q);
      for (int q : from) {
        reqs.emplace_back();
        w.devs[static_cast<size_t>(r)]->pair(q)->post_recv(&in[static_cast<size_t>(q)], sizeof(int), transport::Tag{}, &reqs.back());
      }
      auto deadline = Clock::now() + 10s;
      for (;;) {
        bool pending = false;
        for (auto& q : reqs) pending |= q.state == Request::State::pending;
        if (!pending || Clock::now() > deadline) break;
        if (!w.devs[static_cast<size_t>(r)]->poll()) std::this_thread::sleep_for(20us);
      }
      for (auto& q : reqs)
        if (q.state != Request::State::done) ++bad;
      for (int q : from)
        if (in[static_cast<size_t>(q)] != q * 100 + r) ++bad;
    });
  for (auto& t : ts) t.join();
  ASSERT_EQ(bad.load(), 0);
  for (auto& s : w.sinks) ASSERT_EQ(s->why, Failure::none) << s->detail;
}

}  // namespace

// Lazily, a group holds its listeners and nothing else until it talks; a ring opens one
// connection per neighbour pair (two socket ends per rank in this process: n ranks, 2n ends);
// everyone talking to everyone then completes the mesh, one connection per pair.
TEST(TcpOnDemand, OpensOnlyTheConnectionsItUses) {
  constexpr int n = 5;
  const int base = open_sockets();
  ASSERT_GE(base, 0);
  World w(n);
  EXPECT_EQ(open_sockets(), base + n) << "a lazy device should hold only its listener after setup";

  std::vector<std::vector<int>> ring(n);
  for (int r = 0; r < n; ++r) ring[static_cast<size_t>(r)] = {(r + 1) % n};
  talk(w, ring);
  // Past the receive-side dial delay: a receive must not have dialled anyone more.
  EXPECT_EQ(w.settle(300ms, base + n + 2 * n), base + n + 2 * n) << "a ring should connect each rank to its 2 neighbours only";

  std::vector<std::vector<int>> all(n);
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p)
      if (p != r) all[static_cast<size_t>(r)].push_back(p);
  talk(w, all);
  // Dials that lost a race hear so and close.
  EXPECT_EQ(w.settle(300ms, base + n + n * (n - 1)), base + n + n * (n - 1)) << "after everyone talked: one connection per pair";
}

// Two ranks sending to each other at the same instant, many times over: whichever way each race
// goes, data arrives, nothing fails, and one connection per pair survives.
TEST(TcpOnDemand, BothSidesDiallingAtOnceEndWithOneConnection) {
  const int base = open_sockets();
  for (int round = 0; round < 40; ++round) {
    World w(2);
    talk(w, {{1}, {0}});
    ASSERT_EQ(w.settle(0ms, base + 2 + 2), base + 2 + 2) << "round " << round << ": 2 listeners and one connection expected";
  }
}

namespace {

// A hand-played peer: publishes an address as rank `rank` of the lazy group and does each step
// of the handshake when the test says so, to force one order of a simultaneous connect.
struct FakePeer {
  transport::Bootstrap b;
  Sink sink;
  tcp::Fd listener;
  transport::auth::Nonce nonce = transport::auth::fresh_nonce();
  FakePeer(Store& store, int rank, int size) {
    b = boot(store, rank, size, &sink);
    tcp::Endpoint self;
    listener = tcp::listen_any_port("127.0.0.1", &self);
    store.set("lazy/tcp/" + std::to_string(rank), self.str() + "#" + transport::auth::to_hex(nonce));
  }
  // Dials `peer` and sends our hello; returns the challenge sent.
  tcp::Fd dial(Store& store, int peer, transport::auth::Nonce* challenge, transport::auth::Nonce* peer_nonce) {
    const std::string info = store.get_string("lazy/tcp/" + std::to_string(peer));
    EXPECT_TRUE(transport::auth::from_hex(info.substr(info.rfind('#') + 1), peer_nonce));
    tcp::Fd fd = tcp::connect_until(tcp::parse_endpoint(info.substr(0, info.rfind('#'))), Clock::now() + 5s);
    *challenge = tcp::send_hello(fd.get(), b, peer, *peer_nonce);
    return fd;
  }
};

// Polls `dev` until `fd` has `n` bytes to read (or 5 s pass).
bool poll_until_readable(transport::Device& dev, int fd, size_t n) {
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    dev.poll();
    char buf[256];
    ssize_t got = ::recv(fd, buf, std::min(n, sizeof buf), MSG_PEEK | MSG_DONTWAIT);
    if (got >= static_cast<ssize_t>(n)) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Reads one data frame of an int from `fd`.
int read_int_frame(int fd) {
  tcp::FrameHeader h{};
  tcp::read_all_until(fd, &h, sizeof h, Clock::now() + 5s);
  EXPECT_EQ(h.kind, tcp::FrameKind::data);
  EXPECT_EQ(h.bytes, sizeof(int));
  int v = -1;
  tcp::read_all_until(fd, &v, sizeof v, Clock::now() + 5s);
  return v;
}

}  // namespace

// Rank 0 (the device) is dialling rank 1 (played by hand) when rank 1's own hello arrives: rank 0
// answers "crossed", and its own connection, once accepted, carries the data.
TEST(TcpOnDemand, LowerRankKeepsItsOwnConnectionWhenBothDial) {
  auto store = make_hash_store();
  Sink sink;
  auto dev = tcp::TcpDevice::connect(boot(*store, 0, 2, &sink), {1});
  FakePeer fake(*store, 1, 2);
  int x = 4242;
  Request s;
  dev->pair(1)->post_send(&x, sizeof x, transport::Tag{}, &s);  // rank 0 dials rank 1
  std::string from;
  tcp::Fd incoming = tcp::accept_until(fake.listener.get(), Clock::now() + 5s, &from);
  tcp::Hello their_hello{};
  tcp::read_all_until(incoming.get(), &their_hello, sizeof their_hello, Clock::now() + 5s);  // not answered yet

  transport::auth::Nonce challenge{}, peer_nonce{};
  tcp::Fd outgoing = fake.dial(*store, 0, &challenge, &peer_nonce);  // rank 1 dials rank 0 meanwhile
  ASSERT_TRUE(poll_until_readable(*dev, outgoing.get(), sizeof(tcp::HelloReply)));
  tcp::HelloReply reply{};
  tcp::read_all_until(outgoing.get(), &reply, sizeof reply, Clock::now() + 5s);
  EXPECT_EQ(reply.status, tcp::HelloStatus::crossed) << "the lower rank must keep its own connection";

  // Rank 1 accepts rank 0's connection: the queued send goes out on it.
  tcp::reply_hello(incoming.get(), their_hello, fake.b,
                   tcp::verify_hello(their_hello, fake.b, {true, false}, fake.nonce), fake.nonce);
  ASSERT_TRUE(poll_until_readable(*dev, incoming.get(), sizeof(tcp::FrameHeader) + sizeof(int)));
  EXPECT_EQ(read_int_frame(incoming.get()), 4242);
  EXPECT_EQ(s.state, Request::State::done);
  EXPECT_EQ(sink.why, Failure::none) << sink.detail;
}

// Rank 1 (the device) is dialling rank 0 (played by hand) when rank 0's hello arrives: rank 1
// accepts it and sends on it at once, and drops its own connection when rank 0 answers "crossed".
TEST(TcpOnDemand, HigherRankTakesTheLowerRanksConnectionWhenBothDial) {
  auto store = make_hash_store();
  Sink sink;
  auto dev = tcp::TcpDevice::connect(boot(*store, 1, 2, &sink), {0});
  FakePeer fake(*store, 0, 2);
  int x = 777;
  Request s;
  dev->pair(0)->post_send(&x, sizeof x, transport::Tag{}, &s);  // rank 1 dials rank 0
  std::string from;
  tcp::Fd incoming = tcp::accept_until(fake.listener.get(), Clock::now() + 5s, &from);
  tcp::Hello their_hello{};
  tcp::read_all_until(incoming.get(), &their_hello, sizeof their_hello, Clock::now() + 5s);

  transport::auth::Nonce challenge{}, peer_nonce{};
  tcp::Fd outgoing = fake.dial(*store, 1, &challenge, &peer_nonce);  // rank 0 dials rank 1
  ASSERT_TRUE(poll_until_readable(*dev, outgoing.get(), sizeof(tcp::HelloReply)));
  tcp::expect_hello_reply(outgoing.get(), fake.b, 1, challenge, peer_nonce);  // accepted, and proved
  ASSERT_TRUE(poll_until_readable(*dev, outgoing.get(), sizeof(tcp::FrameHeader) + sizeof(int)));
  EXPECT_EQ(read_int_frame(outgoing.get()), 777) << "the send must go out on the lower rank's connection";

  // Rank 0 tells rank 1's dial it lost: rank 1 closes it.
  tcp::reply_hello(incoming.get(), their_hello, fake.b, tcp::HelloStatus::crossed, fake.nonce);
  auto deadline = Clock::now() + 5s;
  bool closed = false;
  while (!closed && Clock::now() < deadline) {
    dev->poll();
    char c;
    closed = ::recv(incoming.get(), &c, 1, MSG_DONTWAIT) == 0;
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(closed) << "the losing connection must be closed";
  EXPECT_EQ(s.state, Request::State::done);
  EXPECT_EQ(sink.why, Failure::none) << sink.detail;
}

// A peer that published its address and died before anyone connected: the first send to it
// fails within a moment, naming it; so does a receive from it, after the receive-side delay.
TEST(TcpOnDemand, PeerDeadBeforeTheFirstConnectIsNamedAtOnce) {
  World w(3);
  w.devs[2].reset();  // closes its listener: as the process's death would
  int x = 1, y = 0;
  Request s, r;
  const auto start = Clock::now();
  w.devs[0]->pair(2)->post_send(&x, sizeof x, transport::Tag{}, &s);
  w.devs[1]->pair(2)->post_recv(&y, sizeof y, transport::Tag{}, &r);
  while ((s.state == Request::State::pending || r.state == Request::State::pending) && Clock::now() < start + 5s) {
    w.devs[0]->poll();
    w.devs[1]->poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_LT(Clock::now() - start, 2s);
  for (Request* q : {&s, &r}) {
    ASSERT_EQ(q->state, Request::State::failed);
    EXPECT_EQ(q->failure, Failure::peer_closed);
    EXPECT_NE(q->detail.find("rank 2"), std::string::npos) << q->detail;
  }
  EXPECT_EQ(w.sinks[0]->peer, 2);
  EXPECT_EQ(w.sinks[1]->peer, 2);
  // Later posts to it fail at once.
  Request again;
  w.devs[0]->pair(2)->post_send(&x, sizeof x, transport::Tag{}, &again);
  EXPECT_EQ(again.state, Request::State::failed);
}
