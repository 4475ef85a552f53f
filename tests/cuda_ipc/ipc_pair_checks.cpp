// kolo-ipc-test, the pair part: the cuda_ipc pair device (transports/cuda_ipc/ipc_pair_device.hpp)
// over real CUDA IPC between these processes, which the transport conformance suite cannot do
// (its ranks are threads of one process, where CUDA opens no IPC handle: there the pair uses
// the exporter's own address). Every element of every message is checked:
//   IpcPair.ring/<bytes>      each rank sends to the next and receives from the previous, at
//                             sizes on both sides of the staging threshold, the same buffers
//                             three times (exported once: the cache's count is checked);
//   IpcPair.all_pairs         every rank sends 12 messages of mixed sizes to every other and
//                             receives theirs, all posted at once, each pair's order kept;
//   IpcPair.tag_mismatch      rank 1 expects another tag than rank 0 sends: its receive fails
//                             with tag_mismatch and the tag that arrived (a device of its own);
//   IpcPair.close             the orderly close: every peer says goodbye.
#include <cuda_runtime.h>

#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include "ipc_test_support.hpp"
#include "failure_recorder.hpp"
#include "transports/common/auth.hpp"
#include "transports/cuda_ipc/cuda_memory.hpp"
#include "transports/cuda_ipc/ipc_pair_device.hpp"

namespace ipc_test {
namespace {

using kolo::cuda_ipc::IpcPairDevice;
using kolo::transport::Failure;
using kolo::transport::Request;
using kolo::transport::Tag;
using Clock = std::chrono::steady_clock;

Tag tag(uint64_t v) {
  Tag t;
  t.w[0] = v;
  t.w[1] = 0x6b6f6c6f;
  return t;
}

uint8_t byte_of(int from, int to, uint64_t msg, size_t i) {
  return static_cast<uint8_t>((i * 131 + msg * 7 + static_cast<size_t>(from) * 31 + static_cast<size_t>(to) * 17) & 0xff);
}

// A device buffer of n bytes (cudaMalloc: large messages are read from it through CUDA IPC).
struct Bytes {
  void* ptr = nullptr;
  size_t n;
  explicit Bytes(size_t bytes) : n(bytes) { check(cudaMalloc(&ptr, n == 0 ? 1 : n), "cudaMalloc"); }
  ~Bytes() { (void)cudaFree(ptr); }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  void fill(int from, int to, uint64_t msg) {
    std::vector<uint8_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = byte_of(from, to, msg, i);
    check(cudaMemcpy(ptr, h.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    // A pageable upload may return before its DMA has landed; the pair's copies run on a
    // non-blocking stream of their own, not ordered after it.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::string check_from(int from, int to, uint64_t msg) const {
    std::vector<uint8_t> h(n);
    check(cudaMemcpy(h.data(), ptr, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    for (size_t i = 0; i < n; ++i)
      if (h[i] != byte_of(from, to, msg, i))
        return "message " + std::to_string(msg) + " from rank " + std::to_string(from) + ": byte " + std::to_string(i) +
               " of " + std::to_string(n) + " is wrong";
    return "";
  }
};

kolo::transport::Bootstrap bootstrap(kolo::Store& store, const std::string& prefix, kolo::transport::FailureSink* sink) {
  kolo::transport::Bootstrap b;
  b.store = &store;
  b.prefix = prefix;
  b.rank = g_rank;
  b.size = g_world;
  b.secret = kolo::transport::auth::derive_secret("kolo-ipc-test");
  b.deadline = Clock::now() + std::chrono::seconds(30);
  b.host_ids.assign(static_cast<size_t>(g_world), "this-node");
  b.failures = sink;
  return b;
}

std::vector<int> peers() {
  std::vector<int> p;
  for (int r = 0; r < g_world; ++r)
    if (r != g_rank) p.push_back(r);
  return p;
}

// Polls until none of reqs is pending, within 20 s ("" when all completed well).
std::string drive(IpcPairDevice& dev, const std::vector<Request*>& reqs) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (;;) {
    bool pending = false;
    for (Request* r : reqs) pending |= r->state == Request::State::pending;
    if (!pending) break;
    if (Clock::now() > deadline) return "requests still pending after 20 s";
    if (!dev.poll()) std::this_thread::yield();
  }
  for (Request* r : reqs)
    if (r->state != Request::State::done)
      return std::string(r->is_send ? "send to" : "receive from") + " rank " + std::to_string(r->peer) + " failed (" +
             kolo::transport::failure_name(r->failure) + "): " + r->detail;
  return "";
}

void barrier(kolo::Store& store, const std::string& name) {
  store.set("ipc-pair-barrier/" + name + "/" + std::to_string(g_rank), std::string("1"));
  std::vector<std::string> keys;
  for (int r = 0; r < g_world; ++r) keys.push_back("ipc-pair-barrier/" + name + "/" + std::to_string(r));
  store.wait(keys, std::chrono::seconds(30));
}

}  // namespace

void pair_checks(const std::shared_ptr<kolo::Store>& store) {
  if (g_world < 2) return;
  const std::string ranks = "/ranks" + std::to_string(g_world);
  kolo::testing::FailureRecorder sink;
  std::unique_ptr<IpcPairDevice> dev;
  run_case("IpcPair.connect" + ranks, [&]() -> std::string {
    dev = IpcPairDevice::connect(kolo::cuda_ipc::cuda_memory(), bootstrap(*store, "ipc-pair", &sink), peers());
    return "";
  });
  const int next = (g_rank + 1) % g_world, prev = (g_rank + g_world - 1) % g_world;
  uint64_t msg = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{4099}, IpcPairDevice::kEagerMaxBytes, IpcPairDevice::kEagerMaxBytes + 1,
                   size_t{16} << 20}) {
    run_case("IpcPair.ring/" + std::to_string(n) + ranks, [&]() -> std::string {
      Bytes out(n), in(n);
      const uint64_t exports = dev->cache().exports();
      for (int k = 0; k < 3; ++k, ++msg) {
        out.fill(g_rank, next, msg);
        check(cudaMemset(in.ptr, 0, n == 0 ? 1 : n), "cudaMemset");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        Request s, r;
        dev->pair(next)->post_send(out.ptr, n, tag(msg), &s);
        dev->pair(prev)->post_recv(in.ptr, n, tag(msg), &r);
        if (std::string why = drive(*dev, {&s, &r}); !why.empty()) return why;
        if (std::string why = in.check_from(prev, g_rank, msg); !why.empty()) return why;
      }
      const uint64_t want = n > IpcPairDevice::kEagerMaxBytes ? 1 : 0;
      if (dev->cache().exports() != exports + want)
        return "3 messages from one buffer made " + std::to_string(dev->cache().exports() - exports) + " exports, want " +
               std::to_string(want);
      dev->deregister(out.ptr);  // freed next: the peers close their mappings of it
      return "";
    });
  }
  run_case("IpcPair.all_pairs" + ranks, [&]() -> std::string {
    constexpr int kMessages = 12;
    auto size_of = [](int from, int to, int k) {
      return static_cast<size_t>((k * 7919 + from * 613 + to * 101) % 3 == 0 ? 300000 + k : 1000 * k + from + to);
    };
    std::deque<Bytes> out, in;
    std::deque<Request> reqs;
    std::vector<Request*> ptrs;
    for (int k = 0; k < kMessages; ++k)
      for (int p : peers()) {
        out.emplace_back(size_of(g_rank, p, k));
        out.back().fill(g_rank, p, static_cast<uint64_t>(k));
        reqs.emplace_back();
        dev->pair(p)->post_send(out.back().ptr, out.back().n, tag(1000 + static_cast<uint64_t>(k)), &reqs.back());
        ptrs.push_back(&reqs.back());
        in.emplace_back(size_of(p, g_rank, k));
        reqs.emplace_back();
        dev->pair(p)->post_recv(in.back().ptr, in.back().n, tag(1000 + static_cast<uint64_t>(k)), &reqs.back());
        ptrs.push_back(&reqs.back());
      }
    if (std::string why = drive(*dev, ptrs); !why.empty()) return why;
    size_t i = 0;
    for (int k = 0; k < kMessages; ++k)
      for (int p : peers())
        if (std::string why = in[i++].check_from(p, g_rank, static_cast<uint64_t>(k)); !why.empty()) return why;
    for (const Bytes& b : out) dev->deregister(b.ptr);
    return "";
  });
  run_case("IpcPair.tag_mismatch" + ranks, [&]() -> std::string {
    kolo::testing::FailureRecorder sink2;
    auto dev2 = IpcPairDevice::connect(kolo::cuda_ipc::cuda_memory(), bootstrap(*store, "ipc-pair-mismatch", &sink2), peers());
    std::string why;
    if (g_rank <= 1) {
      Bytes b(4096);
      b.fill(0, 1, 5);
      Request q;
      if (g_rank == 0) {
        dev2->pair(1)->post_send(b.ptr, b.n, tag(5), &q);
        why = drive(*dev2, {&q});
      } else {
        dev2->pair(0)->post_recv(b.ptr, b.n, tag(6), &q);
        (void)drive(*dev2, {&q});
        if (q.state != Request::State::failed || q.failure != Failure::tag_mismatch)
          why = std::string("the receive ended ") + kolo::transport::failure_name(q.failure) + ", not tag_mismatch";
        else if (!(q.got_tag == tag(5)))
          why = "the mismatch reports tag " + std::to_string(q.got_tag.w[0]) + ", not 5";
        else if (sink2.peer != 0 || sink2.why != Failure::tag_mismatch)
          why = "the failure sink was not told of rank 0's mismatch";
      }
    }
    barrier(*store, "mismatch");  // nobody leaves before rank 1 has seen the message
    return why;
  });
  run_case("IpcPair.close" + ranks, [&]() -> std::string {
    const std::vector<int> missing = dev->close(Clock::now() + std::chrono::seconds(20));
    if (!missing.empty()) return "no goodbye from rank " + std::to_string(missing[0]);
    if (sink.why != Failure::none) return std::string("a peer failed: ") + sink.detail;
    barrier(*store, "close");
    dev.reset();
    return "";
  });
}

}  // namespace ipc_test
