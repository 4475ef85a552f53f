// kolo's own store over TLS (KOLO_TLS=1 with a job secret: common/tls.hpp, TlsContext::for_store),
// over real loopback sockets. Through a relay that records every byte: with TLS no key, value or
// the secret's text crosses in clear (without TLS the same run shows them: the recording is
// sound). A client in clear (KOLO_TLS unset), one with another job's secret, and a TLS client
// facing a store in clear are each refused with an error naming the address, while a TLS client
// of the job goes on.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "common/tls.hpp"
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

constexpr const char* kSecret = "tls-store-secret-text";

std::shared_ptr<TCPStore> client_of(uint16_t port, const std::string& secret) {
  TCPStore::Options opts;
  opts.port = port;
  opts.timeout = Ms(5000);
  opts.secret = secret;
  return TCPStore::create(opts);
}

// The server as TCPStore::create would host it, with the environment's KOLO_TLS.
std::unique_ptr<TcpStoreServerCore> server_of(const std::string& secret) {
  const auth::Key key = auth::derive_key(secret);
  return TcpStoreServerCore::start("127.0.0.1", 0, key, TcpStoreServerCore::kAuthDeadline, TlsContext::for_store(true, key));
}

// Forwards one port to another and keeps every byte that crossed, both ways.
class Relay {
 public:
  explicit Relay(uint16_t to) : to_(to) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_, 16);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  uint16_t port() const { return port_; }
  std::string seen() {
    std::lock_guard g(mu_);
    return seen_;
  }

 private:
  void run() {
    std::vector<std::pair<int, int>> links;  // (client side, server side)
    while (!stop_) {
      std::vector<pollfd> fds{{listen_, POLLIN, 0}};
      for (auto [c, s] : links) {
        fds.push_back({c, POLLIN, 0});
        fds.push_back({s, POLLIN, 0});
      }
      ::poll(fds.data(), fds.size(), 20);
      if (fds[0].revents & POLLIN) {
        int c = ::accept(listen_, nullptr, nullptr);
        int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(to_);
        ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
        links.emplace_back(c, s);
      }
      for (size_t i = 0; i + 1 < fds.size(); i += 2) {
        auto& [c, s] = links[i / 2];
        for (int dir = 0; dir < 2; ++dir) {
          const pollfd& p = fds[1 + i + static_cast<size_t>(dir)];
          if (!(p.revents & (POLLIN | POLLHUP))) continue;
          char buf[65536];
          const ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
          const int other = dir == 0 ? s : c;
          if (n <= 0) {
            ::shutdown(other, SHUT_WR);
            continue;
          }
          {
            std::lock_guard g(mu_);
            seen_.append(buf, static_cast<size_t>(n));
          }
          ::send(other, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
        }
      }
    }
    for (auto [c, s] : links) {
      ::close(c);
      ::close(s);
    }
  }

  uint16_t to_, port_ = 0;
  int listen_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string seen_;
};

// A job's store traffic through the relay; returns what crossed.
std::string traffic(bool tls) {
  ScopedEnv env;
  if (tls) env.set("KOLO_TLS", "1");
  else env.unset("KOLO_TLS");
  auto server = server_of(kSecret);
  Relay relay(server->port());
  auto a = client_of(relay.port(), kSecret);
  a->set("rendezvous/address-of-rank-7", std::string("10.11.12.13:45678-MARKER"));
  EXPECT_EQ(client_of(relay.port(), kSecret)->get_string("rendezvous/address-of-rank-7"), "10.11.12.13:45678-MARKER");
  EXPECT_EQ(a->add("counter-MARKER", 41), 41);
  return relay.seen();
}

TEST(TcpStoreTls, KeysAndValuesNeverCrossInClear) {
  const std::string clear = traffic(false), sealed = traffic(true);
  // The recording works: in clear the key and value are there.
  ASSERT_NE(clear.find("address-of-rank-7"), std::string::npos);
  ASSERT_NE(clear.find("45678-MARKER"), std::string::npos);
  EXPECT_GT(sealed.size(), 500u) << "nothing crossed the relay";
  EXPECT_EQ(sealed.find("address-of-rank-7"), std::string::npos);
  EXPECT_EQ(sealed.find("MARKER"), std::string::npos);
  EXPECT_EQ(sealed.find(kSecret), std::string::npos);
}

TEST(TcpStoreTls, ClientInClearIsRefusedWhileTlsClientsGoOn) {
  ScopedEnv env;
  env.set("KOLO_TLS", "1");
  auto server = server_of(kSecret);
  auto good = client_of(server->port(), kSecret);
  good->set("k", std::string("v"));
  env.unset("KOLO_TLS");
  try {
    client_of(server->port(), kSecret);
    ADD_FAILURE() << "a client without TLS was served by a TLS store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(server->port())), std::string::npos) << e.what();
  }
  EXPECT_GE(server->refused_connections(), 1u);
  env.set("KOLO_TLS", "1");
  EXPECT_EQ(good->get_string("k"), "v");
  EXPECT_EQ(client_of(server->port(), kSecret)->get_string("k"), "v");
}

TEST(TcpStoreTls, AnotherJobsSecretIsRefusedByTls) {
  ScopedEnv env;
  env.set("KOLO_TLS", "1");
  auto server = server_of(kSecret);
  try {
    client_of(server->port(), "another job's secret");
    ADD_FAILURE() << "a client with another secret was served";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TLS handshake with TCPStore at 127.0.0.1:" + std::to_string(server->port())), std::string::npos) << what;
  }
  EXPECT_EQ(client_of(server->port(), kSecret)->add("n", 2), 2);
}

TEST(TcpStoreTls, TlsClientRefusesAStoreInClear) {
  ScopedEnv env;
  env.unset("KOLO_TLS");
  auto server = server_of(kSecret);
  env.set("KOLO_TLS", "1");
  try {
    client_of(server->port(), kSecret);
    ADD_FAILURE() << "a TLS client talked to a store in clear";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KOLO_TLS=1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kolo
