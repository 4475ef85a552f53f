// What every file of the transport conformance suite shares: the fixture (which transport a
// case runs on, from its parameter), ranks as threads connected over it, device-or-host
// buffers, and the loop that drives requests to an end. The cases include this and open
// namespace kolo::conformance, so that TEST_P finds the fixture by its plain name (the suite
// stays "TransportConformance": the case names do not change with the file they live in).
// One instantiation for all of them: transport_conformance_test.cpp.
//
// Everything here is inline (variables too): one rank's transport, laziness and device memory
// are set by SetUp() and read by the helpers in whichever file the case is, so each must exist
// once in the binary, not once per file.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/transport.hpp"
#include "transports/cuda_ipc/ipc_pair_device.hpp"
#include "transports/cuda_ipc/standin_memory.hpp"
#ifdef KOLO_TEST_CUDA_IPC
#include "transports/cuda_ipc/cuda_memory.hpp"
#endif
#include "failure_recorder.hpp"

namespace kolo::conformance {

using namespace std::chrono_literals;
using transport::Failure;
using transport::failure_name;
using transport::Request;
using transport::Tag;
using Clock = std::chrono::steady_clock;

using Sink = kolo::testing::FailureRecorder;

struct Rank {
  Sink sink;
  std::unique_ptr<transport::Device> dev;
};

inline const transport::TransportInfo* g_transport = nullptr;  // the transport under test
inline bool g_lazy = false;                                      // ... connecting on first use
inline std::shared_ptr<Store> g_store;                           // outlives the lazily connected devices
inline cuda_ipc::IpcMemory* g_memory = nullptr;  // device memory of the transport under test; null: host

// A case's buffer: `host` is what the test reads and writes; data() is what it posts, the same
// memory for a host transport, device memory (g_memory) for a device one, where push() uploads
// `host` and pull() downloads into it.
template <class T>
class Buf {
 public:
  explicit Buf(size_t n, T fill = T{}) : host(n, fill) {
    if (g_memory) {
      dev_ = g_memory->allocate(n * sizeof(T));
      push();
    }
  }
  Buf(Buf&& o) noexcept : host(std::move(o.host)), dev_(o.dev_) { o.dev_ = nullptr; }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() {
    if (dev_) g_memory->release(dev_);
  }
  T* data() { return dev_ ? static_cast<T*>(dev_) : host.data(); }
  size_t size() const { return host.size(); }
  size_t bytes() const { return host.size() * sizeof(T); }
  void push() {
    if (dev_) g_memory->to_device(dev_, host.data(), bytes());
  }
  const std::vector<T>& pull() {
    if (dev_) g_memory->to_host(host.data(), dev_, bytes());
    return host;
  }
  std::vector<T> host;

 private:
  void* dev_ = nullptr;
};

inline transport::Bootstrap make_bootstrap(Store& store, int rank, int size, Sink* sink, uint8_t secret_byte = 7,
                                           std::chrono::milliseconds timeout = 10s) {
  transport::Bootstrap b;
  b.host_ids.assign(static_cast<size_t>(size), "this-host");  // one host: shm reaches every peer
  b.store = &store;
  b.prefix = "test";
  b.rank = rank;
  b.size = size;
  b.secret.fill(secret_byte);
  b.deadline = Clock::now() + timeout;
  b.listen_addr = "127.0.0.1";
  b.failures = sink;
  b.connect_lazily = g_lazy;
  return b;
}

// Connects `size` ranks in threads over g_transport; returns them connected (lazily: ready to
// connect on first use; the store stays alive for the lookups that come later).
inline std::vector<std::unique_ptr<Rank>> connect_all(int size) {
  g_store = make_hash_store();
  Store* store = g_store.get();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<Rank>());
  std::vector<std::thread> ts;
  for (int r = 0; r < size; ++r)
    ts.emplace_back([&, r] {
      std::vector<int> peers;
      for (int p = 0; p < size; ++p)
        if (p != r) peers.push_back(p);
      ranks[static_cast<size_t>(r)]->dev =
          g_transport->connect(make_bootstrap(*store, r, size, &ranks[static_cast<size_t>(r)]->sink), peers);
    });
  for (auto& t : ts) t.join();
  return ranks;
}

// Drives `dev` until every request is no longer pending, or fails the test after 10 s. `also`,
// when given, is polled too: a lazily connected device answers a connection only while it is
// polled, so a test that drives one side at a time keeps the other side's device turning.
inline void drive(transport::Device& dev, std::vector<Request*> reqs, transport::Device* also = nullptr) {
  auto deadline = Clock::now() + 10s;
  for (;;) {
    bool pending = false;
    for (auto* r : reqs) pending |= r->state == Request::State::pending;
    if (!pending) return;
    ASSERT_LT(Clock::now(), deadline) << "requests did not complete";
    bool moved = dev.poll();
    if (also) moved |= also->poll();
    if (!moved) std::this_thread::sleep_for(50us);
  }
}

inline Tag tag(uint64_t a) {
  Tag t;
  t.w[0] = a;
  t.w[1] = a * 3;
  t.w[2] = ~a;
  return t;
}

// A transport's name, with "/lazy" for its on-demand mode.
class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string param = GetParam();
    // "/tls": the same suite with KOLO_TLS=1 (pre-shared key from the secret; the devices read
    // the environment when they connect, before any rank thread starts).
    tls_ = param.size() > 4 && param.substr(param.size() - 4) == "/tls";
    if (tls_) {
      param = param.substr(0, param.size() - 4);
      ::setenv("KOLO_TLS", "1", 1);
      ::setenv("KOLO_SECRET", "conformance", 1);
    }
    g_lazy = param.size() > 5 && param.substr(param.size() - 5) == "/lazy";
    g_memory = nullptr;
    if (param == "cuda_ipc/standin") {
      g_transport = &cuda_ipc::standin_pair_transport();
      g_memory = &cuda_ipc::standin_memory();
    } else if (param == "cuda_ipc") {
#ifdef KOLO_TEST_CUDA_IPC
      std::string why;
      if (!cuda_ipc::cuda_device_usable(&why)) GTEST_SKIP() << "cuda_ipc: " << why;
      g_transport = &cuda_ipc::cuda_pair_transport();
      g_memory = &cuda_ipc::cuda_memory();
#endif
    } else {
      g_transport = transport::find_transport(g_lazy ? param.substr(0, param.size() - 5) : param);
    }
    ASSERT_NE(g_transport, nullptr);
    auto store = make_hash_store();
    Sink sink;
    if (!g_transport->reaches(make_bootstrap(*store, 0, 2, &sink), 1))
      GTEST_SKIP() << GetParam() << " does not reach a peer on this machine";
  }
  void TearDown() override {
    g_memory = nullptr;
    if (!tls_) return;
    ::unsetenv("KOLO_TLS");
    ::unsetenv("KOLO_SECRET");
  }
  bool tls_ = false;
};

}  // namespace kolo::conformance
