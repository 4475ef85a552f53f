// KOLO_STORE_AUTH as init_from_env applies it (one-rank groups, real loopback stores): with a
// job secret and rank 0 hosting, the store is authenticated (a client without the secret reads
// nothing); off, or under torchrun's agent store (whose c10d protocol cannot authenticate), it
// is not, and the second is said once in the log; contradictory settings are errors.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "kolo/error.hpp"
#include "kolo/process_group.hpp"
#include "kolo/store.hpp"

namespace kolo {
namespace {

using Ms = std::chrono::milliseconds;

// Sets variables for one test and restores what was there.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>& vars) {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "KOLO_SECRET", "KOLO_STORE_AUTH",
                             "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(name);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::map<std::string, std::string> rank0_of_1(uint16_t port) {
  return {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
}

// Whether a client with `secret` (empty: plain c10d) can write and read a key on the store.
bool can_use(uint16_t port, const std::string& secret) {
  try {
    TCPStore::Options o;
    o.port = port;
    o.timeout = Ms(2000);
    o.secret = secret;
    o.protocol = TCPStore::Protocol::kValidated;
    auto store = TCPStore::create(o);
    store->set("probe", std::string("x"));
    return store->get_string("probe") == "x";
  } catch (const Error&) {
    return false;
  }
}

GroupOptions quick() {
  GroupOptions g;
  g.timeout = Ms(10000);
  return g;
}

TEST(StoreAuthPolicy, WithASecretRankZerosStoreIsAuthenticated) {
  const uint16_t port = free_port();
  auto vars = rank0_of_1(port);
  vars["KOLO_SECRET"] = "policy secret";
  Env env(vars);
  auto pg = init_from_env(quick());
  EXPECT_FALSE(can_use(port, ""));
  EXPECT_FALSE(can_use(port, "another secret"));
  EXPECT_TRUE(can_use(port, "policy secret"));
  pg->shutdown();
}

TEST(StoreAuthPolicy, OffOrWithoutASecretTheStoreIsOpenAsC10dExpects) {
  for (const auto& [mode, secret] : std::map<std::string, std::string>{{"off", "policy secret"}, {"auto", ""}}) {
    SCOPED_TRACE(mode);
    const uint16_t port = free_port();
    auto vars = rank0_of_1(port);
    vars["KOLO_STORE_AUTH"] = mode;
    if (!secret.empty()) vars["KOLO_SECRET"] = secret;
    Env env(vars);
    auto pg = init_from_env(quick());
    EXPECT_TRUE(can_use(port, ""));
    pg->shutdown();
  }
}

TEST(StoreAuthPolicy, UnderTorchrunsAgentStoreItIsOffAndSaidOnce) {
  // Stands in for torchrun's agent: a store with no authentication, as torch's is.
  auto agent = TCPStoreServer::start("127.0.0.1", 0);
  auto vars = rank0_of_1(agent->port());
  vars["KOLO_SECRET"] = "policy secret";
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  Env env(vars);
  testing::internal::CaptureStderr();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto pg = init_from_env(quick());
    pg->shutdown();
  }
  const std::string log = testing::internal::GetCapturedStderr();
  const std::string said = "torchrun's agent store, whose c10d protocol has no authentication";
  const size_t first = log.find(said);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(said, first + 1), std::string::npos) << "said more than once:\n" << log;
}

TEST(StoreAuthPolicy, ContradictorySettingsAreErrors) {
  {
    auto agent = TCPStoreServer::start("127.0.0.1", 0);
    auto vars = rank0_of_1(agent->port());
    vars["KOLO_SECRET"] = "policy secret";
    vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    vars["KOLO_STORE_AUTH"] = "on";
    Env env(vars);
    EXPECT_THROW(init_from_env(quick()), InvalidArgument);
  }
  {
    auto vars = rank0_of_1(free_port());
    vars["KOLO_STORE_AUTH"] = "on";  // and no KOLO_SECRET
    Env env(vars);
    EXPECT_THROW(init_from_env(quick()), InvalidArgument);
  }
  {
    auto vars = rank0_of_1(free_port());
    vars["KOLO_STORE_AUTH"] = "sometimes";
    Env env(vars);
    EXPECT_THROW(init_from_env(quick()), InvalidArgument);
  }
}

}  // namespace
}  // namespace kolo
