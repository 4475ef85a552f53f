// A rank of tests/store/store_auth_job_test.cpp, started by kolorun (which sets KOLO_SECRET): joins
// the group through init_from_env (kolorun hosts the store, authenticated, at KOLO_STORE_ADDR,
// whose port rank 0 writes to the file KOLO_TEST_STORE_FILE names), waits until the test has
// attacked the store (the file named by KOLO_TEST_GO_FILE exists), then all-reduces and looks
// through its own authenticated client for the key the attacker tried to write.
#include <kolo/kolo.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main() {
  try {
    auto pg = kolo::init_from_env();
    const int rank = pg->rank(), size = pg->size();
    const char* go = std::getenv("KOLO_TEST_GO_FILE");
    if (go == nullptr) throw kolo::Error("KOLO_TEST_GO_FILE is not set");
    const kolo::LaunchEnv env = kolo::read_launch_env();
    if (env.store_port == 0) throw kolo::Error("KOLO_STORE_ADDR is not set: kolorun hosts the store");
    if (rank == 0) {
      const char* port_file = std::getenv("KOLO_TEST_STORE_FILE");
      if (port_file == nullptr) throw kolo::Error("KOLO_TEST_STORE_FILE is not set");
      const std::string tmp = std::string(port_file) + ".tmp";
      std::ofstream(tmp) << env.store_port << "\n";
      std::rename(tmp.c_str(), port_file);  // whole, or not yet there
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (::access(go, F_OK) != 0) {
      if (std::chrono::steady_clock::now() > give_up) throw kolo::Error("the test never said go");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::vector<int32_t> v(1000, rank + 1);
    pg->allreduce(kolo::Buffer(v.data(), v.size()))->wait();
    const int32_t want = size * (size + 1) / 2;
    for (int32_t x : v)
      if (x != want) {
        std::fprintf(stderr, "rank %d: allreduce gave %d, expected %d\n", rank, x, want);
        return 1;
      }
    // A second, authenticated client of the job's store: the attacker's key must not be there.
    kolo::TCPStore::Options so;
    so.host = env.store_host;
    so.port = env.store_port;
    so.secret = std::getenv("KOLO_SECRET");
    so.timeout = std::chrono::milliseconds(10000);
    auto store = kolo::TCPStore::create(so);
    const bool planted = store->check({"victim"});
    std::printf("rank %d: allreduce %d, attacker's key %s\n", rank, v[0], planted ? "PRESENT" : "absent");
    std::fflush(stdout);
    pg->allreduce(kolo::Buffer(v.data(), 1))->wait();  // nobody leaves (and takes the store) early
    pg->shutdown();
    return planted ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
