// TCPStore specifics: waiters parked on the server (no polling), clients that start before the
// server, unreachable servers, world_size joining, forked clients, a vanished server, and a
// client sending garbage.
#include <gtest/gtest.h>
#include <poll.h>

#include <future>

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
