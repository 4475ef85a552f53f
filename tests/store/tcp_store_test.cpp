// TCPStore specifics: waiters parked on the server (no polling), clients that start before the
// server, unreachable servers, world_size joining, forked clients, a vanished server, and a
// client sending garbage.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdio>
#include <future>
#include <random>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "store/tcp_store_server.hpp"
#include "store_test_util.hpp"

namespace kolo {
namespace {

using namespace store_test;
using store_detail::TcpStoreServerCore;

std::shared_ptr<TCPStore> client_of(uint16_t port, Ms timeout = Ms(5000), int world_size = -1) {
  TCPStore::Options opts;
  opts.port = port;
  opts.timeout = timeout;
  opts.world_size = world_size;
  return TCPStore::create(opts);
}

// Polls `ready` (a test-side check, not the store) for up to `limit`.
template <typename Ready>
bool eventually(Ready ready, Ms limit = Ms(3000)) {
  Stopwatch clock;
  while (!ready()) {
    if (clock.elapsed() > limit) return false;
    std::this_thread::sleep_for(Ms(5));
  }
  return true;
}

TEST(TcpStore, ParkedWaitersCostTheServerNothingUntilTheKeyArrives) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  constexpr int kWaiters = 6;
  std::vector<std::shared_ptr<TCPStore>> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(client_of(server->port()));
  std::vector<std::future<std::string>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&, i] {
      if (i % 2) {
        clients[i]->wait({"go"}, Ms(5000));
        return std::string("waited");
      }
      return clients[i]->get_string("go");
    }));
  }
  ASSERT_TRUE(eventually([&] { return server->parked_requests() == kWaiters; }));
  const uint64_t before = server->requests_handled();
  std::this_thread::sleep_for(Ms(300));
  EXPECT_EQ(server->requests_handled(), before) << "someone polled while waiting";

  client_of(server->port())->set("go", std::string("now"));
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_EQ(waiters[i].wait_for(Ms(3000)), std::future_status::ready);
    EXPECT_EQ(waiters[i].get(), i % 2 ? "waited" : "now");
  }
  EXPECT_EQ(server->parked_requests(), 0u);
}

TEST(TcpStore, TimedOutWaiterIsUnparkedAndItsConnectionStaysUsable) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  auto client = client_of(server->port());
  Stopwatch clock;
  EXPECT_THROW(client->wait({"missing"}, Ms(200)), TimeoutError);
  EXPECT_LE(clock.elapsed(), Ms(200) + kTimeoutSlack);
  EXPECT_EQ(server->parked_requests(), 0u);
  client->set("after", std::string("fine"));
  EXPECT_EQ(client->get_string("after"), "fine");
}

TEST(TcpStore, ThreadsCanShareOneClient) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  auto client = client_of(server->port());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) client->add("n", 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(client->add("n", 0), 400);
}

TEST(TcpStore, ClientStartedBeforeTheServerConnectsOnceItListens) {
  const uint16_t port = unused_port();
  auto early = std::async(std::launch::async, [&] {
    auto client = client_of(port, Ms(5000));
    return client->get_string("greeting");
  });
  std::this_thread::sleep_for(Ms(300));
  TCPStore::Options opts;
  opts.port = port;
  opts.is_server = true;
  opts.timeout = Ms(5000);
  auto server = TCPStore::create(opts);
  EXPECT_EQ(server->port(), port);
  server->set("greeting", std::string("hi"));
  ASSERT_EQ(early.wait_for(Ms(5000)), std::future_status::ready);
  EXPECT_EQ(early.get(), "hi");
}

TEST(TcpStore, UnreachableServerFailsAtTheTimeoutWithAClearMessage) {
  const uint16_t port = unused_port();
  Stopwatch clock;
  try {
    client_of(port, Ms(300));
    FAIL() << "connected to a port nobody listens on";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(std::string(e.what()), "TCPStore: could not connect to 127.0.0.1:" + std::to_string(port) +
                                         " within 300 ms: Connection refused");
  }
  EXPECT_GE(clock.elapsed(), Ms(290));
  EXPECT_LE(clock.elapsed(), Ms(300) + kTimeoutSlack);
}

TEST(TcpStore, ServerCreationWaitsForWorldSizeClients) {
  // Clients must know the port before the server is up: pick a free one; they retry until it listens.
  TCPStore::Options opts;
  opts.port = unused_port();
  opts.is_server = true;
  opts.world_size = 3;
  opts.timeout = Ms(5000);
  auto server = std::async(std::launch::async, [&] { return TCPStore::create(opts); });
  // As with c10d, the clients that count are those told the world size.
  auto first = client_of(opts.port, Ms(5000), 3);
  auto bystander = client_of(opts.port);
  EXPECT_EQ(server.wait_for(Ms(200)), std::future_status::timeout) << "returned with 2 of 3 clients";
  auto second = client_of(opts.port, Ms(5000), 3);
  ASSERT_EQ(server.wait_for(Ms(3000)), std::future_status::ready);
  auto store = server.get();
  store->set("k", std::string("v"));
  EXPECT_EQ(second->get_string("k"), "v");
  // c10d counts every key, its "init/" joining counter included (torch's clients expect that).
  EXPECT_EQ(store->num_keys(), 2);
  EXPECT_EQ(second->get_string("k"), "v");
}

TEST(TcpStore, ServerCreationTimesOutWhenClientsAreMissing) {
  TCPStore::Options opts;
  opts.port = unused_port();
  opts.is_server = true;
  opts.world_size = 3;
  opts.timeout = Ms(300);
  auto server = std::async(std::launch::async, [&] { return TCPStore::create(opts); });
  auto lone = client_of(opts.port, Ms(5000), 3);
  Stopwatch clock;
  try {
    server.get();
    FAIL() << "server store created with 2 of 3 clients";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("only 2 of 3"), std::string::npos) << e.what();
  }
  EXPECT_LE(clock.elapsed(), Ms(300) + kTimeoutSlack);
}

TEST(TcpStore, ForkedClientsAddAtomically) {
  // Children are forked before any thread exists, then learn the server's port through a pipe.
  int port_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  constexpr int kChildren = 3;
  constexpr int kAdds = 100;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    children.push_back(fork_child([&, c] {
      pollfd pfd{port_pipe[0], POLLIN, 0};
      if (::poll(&pfd, 1, 5000) != 1) return false;
      uint16_t port = 0;
      if (::read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) return false;
      auto client = client_of(port);
      for (int i = 0; i < kAdds; ++i) client->add("total", c + 1);
      client->set("done/" + std::to_string(c), std::string("1"));
      return true;
    }));
  }
  auto server = TCPStoreServer::start("127.0.0.1", 0);
  uint16_t port = server->port();
  for (int c = 0; c < kChildren; ++c) ASSERT_EQ(::write(port_pipe[1], &port, sizeof(port)), ssize_t(sizeof(port)));
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0);
  ::close(port_pipe[0]);
  ::close(port_pipe[1]);
  auto client = client_of(port);
  client->wait({"done/0", "done/1", "done/2"}, Ms(1000));
  EXPECT_EQ(client->add("total", 0), kAdds * (1 + 2 + 3));
}

TEST(TcpStore, VanishedServerIsAPeerError) {
  auto server = TCPStoreServer::start("127.0.0.1", 0);
  auto client = client_of(server->port(), Ms(300));
  client->set("k", std::string("v"));
  server.reset();
  EXPECT_THROW(client->get("k"), PeerError);
  // The next request tries to reconnect, and fails at the timeout with the connect error.
  EXPECT_THROW(client->get("k"), TimeoutError);
}

TEST(TcpStore, GarbageFromOneClientDoesNotDisturbOthers) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  auto good = client_of(server->port());
  good->set("k", std::string("v"));

  int raw = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(server->port());
  ASSERT_EQ(::connect(raw, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const uint8_t huge_frame[] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3};
  ASSERT_EQ(::send(raw, huge_frame, sizeof(huge_frame), MSG_NOSIGNAL), ssize_t(sizeof(huge_frame)));
  pollfd pfd{raw, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 3000), 1);
  char byte;
  EXPECT_EQ(::recv(raw, &byte, 1, 0), 0) << "the server should hang up on garbage";
  ::close(raw);

  EXPECT_EQ(good->get_string("k"), "v");
  EXPECT_TRUE(eventually([&] { return server->open_connections() == 1; }));
}

// Raw bytes in, raw bytes out: the wire format pinned against c10d's layout, written by hand
// rather than by kolo's own encoder.
namespace raw {
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
void put_str(std::string& s, const std::string& v) {
  put_u64(s, v.size());
  s += v;
}
int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  return fd;
}
std::string read_n(int fd, size_t n) {
  std::string out;
  while (out.size() < n) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 3000) != 1) break;
    char buf[256];
    ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}
}  // namespace raw

TEST(TcpStore, ServerSpeaksTorch2DialectByteForByte) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  int fd = raw::connect_to(server->port());
  ASSERT_GE(fd, 0);
  std::string req;
  req += '\x00';
  req += std::string("\xCE\xF7\x85\x3C", 4);  // VALIDATE 0x3C85F7CE
  req += '\x01';                              // SET
  raw::put_str(req, "/abc");
  raw::put_str(req, "xyz");
  req += '\x0D';  // PING
  req += std::string("\x11\x22\x33\x44", 4);
  req += '\x03';  // GET
  raw::put_str(req, "/abc");
  req += '\x04';  // ADD
  raw::put_str(req, "/n");
  raw::put_u64(req, 5);
  req += '\x05';  // CHECK
  raw::put_u64(req, 1);
  raw::put_str(req, "/missing");
  req += '\x07';  // GETNUMKEYS
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string want = "\x11\x22\x33\x44";
  raw::put_str(want, "xyz");
  raw::put_u64(want, 5);
  want += '\x01';  // NOT_READY
  raw::put_u64(want, 2);
  EXPECT_EQ(raw::read_n(fd, want.size()), want);
  ::close(fd);
  // A kolo client reads what the raw one wrote: same key space, "/" prefix and all.
  EXPECT_EQ(client_of(server->port())->get_string("abc"), "xyz");
}

TEST(TcpStore, ServerSpeaksTorch1DialectByteForByte) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  int fd = raw::connect_to(server->port());
  ASSERT_GE(fd, 0);
  std::string req;
  req += '\x00';  // SET, no handshake
  raw::put_str(req, "/abc");
  raw::put_str(req, "xyz");
  req += '\x05';  // WAIT
  raw::put_u64(req, 1);
  raw::put_str(req, "/abc");
  req += '\x02';  // GET
  raw::put_str(req, "/abc");
  req += '\x08';  // DELETE_KEY
  raw::put_str(req, "/abc");
  req += '\x06';  // GETNUMKEYS
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), ssize_t(req.size()));
  std::string want;
  want += '\x00';  // STOP_WAITING
  raw::put_str(want, "xyz");
  raw::put_u64(want, 1);
  raw::put_u64(want, 0);
  EXPECT_EQ(raw::read_n(fd, want.size()), want);
  ::close(fd);
}

TEST(TcpStore, ForcedLegacyClientWorksAndCancelledWaitsLeaveNoStrayReplies) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  TCPStore::Options opts;
  opts.port = server->port();
  opts.timeout = Ms(5000);
  opts.protocol = TCPStore::Protocol::kLegacy;
  auto legacy = TCPStore::create(opts);
  EXPECT_EQ(legacy->protocol_name(), "torch<=2.0");
  auto modern = client_of(server->port());
  EXPECT_EQ(modern->protocol_name(), "torch>=2.1");
  EXPECT_THROW(legacy->wait({"late"}, Ms(100)), TimeoutError);
  EXPECT_THROW(modern->wait({"late"}, Ms(100)), TimeoutError);
  modern->set("late", std::string("now"));  // would wake an abandoned WAIT, if one were left
  legacy->set("k", std::string("v"));
  EXPECT_EQ(legacy->get_string("k"), "v");
  EXPECT_EQ(modern->get_string("k"), "v");
  EXPECT_EQ(legacy->add("n", 3), 3);
  EXPECT_EQ(modern->add("n", 3), 6);
  EXPECT_TRUE(eventually([&] { return server->parked_requests() == 0; }));
}

// Resident set size of this process, in bytes.
size_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(TcpStore, HostileClientsAreDroppedWhileARendezvousGoesOnIntact) {
  auto server = TcpStoreServerCore::start("127.0.0.1", 0);
  auto good = client_of(server->port());
  const size_t rss_before = rss_bytes();
  std::mt19937 rng(7);
  std::vector<int> hostile;
  // 1,000 connections at once; every tenth sends something nasty, the rest stay silent.
  for (int i = 0; i < 1000; ++i) {
    int fd = raw::connect_to(server->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    std::string bytes;
    switch (i % 40) {
      case 0:  // random bytes
        for (int b = 0; b < 4096; ++b) bytes.push_back(static_cast<char>(rng()));
        break;
      case 10: {  // a >= 2.1 SET claiming a 2^40-byte value
        bytes = std::string("\x00\xCE\xF7\x85\x3C\x01", 6);
        raw::put_str(bytes, "/k");
        raw::put_u64(bytes, uint64_t(1) << 40);
        bytes += "abc";
        break;
      }
      case 20: {  // a legacy WAIT claiming 2^40 keys
        bytes = "\x05";
        raw::put_u64(bytes, uint64_t(1) << 40);
        break;
      }
      case 30: {  // half a request, then silence
        bytes = std::string("\x00\xCE\xF7\x85\x3C\x01", 6);
        raw::put_u64(bytes, 100);
        bytes += "only part of the key";
        break;
      }
      default: break;
    }
    if (!bytes.empty()) ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    hostile.push_back(fd);
  }
  // The rendezvous goes on meanwhile, exactly.
  for (int i = 0; i < 200; ++i) good->set("key" + std::to_string(i), std::to_string(i * i));
  for (int i = 0; i < 200; ++i) ASSERT_EQ(good->get_string("key" + std::to_string(i)), std::to_string(i * i));
  EXPECT_EQ(good->add("n", 5), 5);
  // Random bytes, the 2^40 value and the 2^40 key count were dropped (not answered, not stored).
  EXPECT_TRUE(eventually([&] { return server->dropped_connections() >= 50; })) << server->dropped_connections();
  EXPECT_FALSE(good->check({"k"}));
  // Nothing was allocated from a claimed length.
  EXPECT_LT(rss_bytes(), rss_before + (64u << 20));
  for (int fd : hostile) ::close(fd);
  EXPECT_TRUE(eventually([&] { return server->open_connections() == 1; })) << server->open_connections();
  EXPECT_EQ(good->get_string("key199"), std::to_string(199 * 199));
}

TEST(TcpStore, StandaloneServerReportsItsEphemeralPort) {
  auto server = TCPStoreServer::start("127.0.0.1", 0);
  ASSERT_NE(server->port(), 0);
  auto a = client_of(server->port());
  auto b = client_of(server->port());
  a->set("x", std::string("1"));
  EXPECT_EQ(b->get_string("x"), "1");
  EXPECT_THROW(TCPStoreServer::start("127.0.0.1", server->port()), Error) << "port already taken";
}

}  // namespace
}  // namespace kolo
