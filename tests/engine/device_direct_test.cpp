// The engine's direct device path (src/engine/device_direct.hpp) without a GPU: which operations
// it takes (the same answer on every rank: it depends on the operation and the group only), and
// its Work's GPU side on a fake CUDA runtime whose events the test completes by hand. The path
// itself (CUDA IPC) runs on a GPU only: scripts/env/device-check.d/ipc_engine.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "engine/device_direct.hpp"
#include "engine/work_access.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "quiet_runtime.hpp"

namespace {

using kolo::DataType;
using kolo::ReduceKind;
using kolo::algo::CollArgs;
using kolo::algo::CollKind;

// Says it is CUDA; records what the Work asks of it. Events complete when the test says so.
class FakeCuda : public kolo::testing::QuietRuntime {
 public:
  const char* name() const override { return "cuda"; }
  void* create_event() override { return &event_done; }
  void destroy_event(void*) override { ++destroyed; }
  void record(void* event, void* stream) override {
    recorded_on = stream;
    static_cast<std::atomic<bool>*>(event)->store(false);
  }
  bool done(void* event) override { return static_cast<std::atomic<bool>*>(event)->load(); }
  void stream_wait(void* stream, void*) override { waited_by.push_back(stream); }

  std::atomic<bool> event_done{false};
  void* recorded_on = nullptr;
  std::vector<void*> waited_by;
  int destroyed = 0;
};

CollArgs args(CollKind kind, DataType t, size_t count, ReduceKind op = ReduceKind::sum) {
  static char a[1], b[1];
  CollArgs x;
  x.kind = kind;
  x.dtype = t;
  x.count = count;
  x.op.kind = op;
  x.send = a;
  x.recv = b;
  return x;
}

struct EnvGuard {
  EnvGuard(const char* name, const char* value) : name(name) { setenv(name, value, 1); }
  ~EnvGuard() { unsetenv(name); }
  const char* name;
};

}  // namespace

TEST(DeviceDirect, TakesTheCollectivesCudaIpcDoesAndNothingElse) {
  if (!kolo::transport::device_collectives_built()) GTEST_SKIP() << "this build has no CUDA: no device collectives";
  EnvGuard on("KOLO_CUDA_IPC", "1"), min("KOLO_CUDA_IPC_MIN_BYTES", "1K");
  FakeCuda cuda;
  kolo::engine::DirectDevice d;
  d.configure(kolo::make_hash_store(), "g", 0, 2, /*one_host=*/true, /*owns_connections=*/true, std::chrono::seconds(5), {});
  EXPECT_TRUE(d.wants(args(CollKind::allreduce, DataType::float32, 256), cuda));
  EXPECT_TRUE(d.wants(args(CollKind::allreduce, DataType::bfloat16, 512), cuda));
  EXPECT_TRUE(d.wants(args(CollKind::reduce_scatter, DataType::float16, 512), cuda));
  EXPECT_TRUE(d.wants(args(CollKind::allgather, DataType::int64, 128), cuda));  // moves: any type
  EXPECT_TRUE(d.wants(args(CollKind::broadcast, DataType::uint8, 1024), cuda));
  EXPECT_TRUE(d.wants(args(CollKind::alltoall, DataType::int32, 256), cuda));
  EXPECT_FALSE(d.wants(args(CollKind::allreduce, DataType::float32, 255), cuda)) << "under the threshold";
  EXPECT_FALSE(d.wants(args(CollKind::allreduce, DataType::int32, 1024), cuda)) << "no integer sums";
  EXPECT_FALSE(d.wants(args(CollKind::allreduce, DataType::float32, 1024, ReduceKind::max), cuda)) << "sum only";
  EXPECT_FALSE(d.wants(args(CollKind::allreduce, DataType::float64, 1024), cuda)) << "no float64 sums";
  EXPECT_TRUE(d.wants(args(CollKind::gather, DataType::float64, 1024), cuda));
  EXPECT_TRUE(d.wants(args(CollKind::scatter, DataType::int8, 1024), cuda));
  EXPECT_FALSE(d.wants(args(CollKind::send, DataType::float32, 1024), cuda));
  // In place or not is a rank's own business (a reduce's root may be in place, the others not):
  // the answer must not change with it, or the ranks would take different paths and wait.
  for (CollKind k : {CollKind::alltoall, CollKind::reduce, CollKind::allreduce}) {
    CollArgs in_place = args(k, DataType::float32, 1024);
    in_place.recv = const_cast<void*>(in_place.send);
    EXPECT_EQ(d.wants(in_place, cuda), d.wants(args(k, DataType::float32, 1024), cuda)) << kolo::algo::coll_name(k);
  }

  struct Standin : FakeCuda {
    const char* name() const override { return "host stand-in"; }
  } standin;
  EXPECT_FALSE(d.wants(args(CollKind::allreduce, DataType::float32, 1024), standin)) << "the stand-in has no IPC";
}

TEST(DeviceDirect, OffUnlessAskedForAndOnlyForAGroupOnOneHostThatOwnsItsConnections) {
  FakeCuda cuda;
  const CollArgs big = args(CollKind::allreduce, DataType::float32, 1 << 20);
  {
    kolo::engine::DirectDevice d;
    d.configure(kolo::make_hash_store(), "g", 0, 2, true, true, std::chrono::seconds(5), {});
    EXPECT_FALSE(d.wants(big, cuda)) << "KOLO_CUDA_IPC is 0 by default";
  }
  EnvGuard on("KOLO_CUDA_IPC", "1");
  for (auto [one_host, owns, size] : {std::tuple{false, true, 2}, std::tuple{true, false, 2}, std::tuple{true, true, 1}}) {
    kolo::engine::DirectDevice d;
    d.configure(kolo::make_hash_store(), "g", 0, size, one_host, owns, std::chrono::seconds(5), {});
    EXPECT_FALSE(d.wants(big, cuda)) << "one_host " << one_host << " owns " << owns << " size " << size;
  }
}

TEST(DeviceDirect, TheWorkIsDoneOnTheHostAndItsGpuSideIsAnEventOnTheIssuingStream) {
  FakeCuda cuda;
  int issuing = 0, other = 0;
  auto w = kolo::engine::WorkAccess::make_derived<kolo::engine::DirectDeviceWork>("allreduce", 7, cuda, &issuing);
  kolo::engine::WorkAccess::finish(*w, nullptr);
  EXPECT_EQ(cuda.recorded_on, &issuing);
  EXPECT_TRUE(w->on_device());
  EXPECT_FALSE(w->is_completed()) << "the GPU has not passed the event";
  w->wait();  // the issuing stream is behind the operation already: nothing to queue
  EXPECT_TRUE(cuda.waited_by.empty());
  w->wait_stream(&other);
  ASSERT_EQ(cuda.waited_by.size(), 1u);
  EXPECT_EQ(cuda.waited_by[0], &other);
  EXPECT_THROW(w->synchronize(std::chrono::milliseconds(20)), kolo::TimeoutError);
  cuda.event_done = true;
  EXPECT_TRUE(w->is_completed());
  EXPECT_NO_THROW(w->synchronize(std::chrono::milliseconds(20)));
  w.reset();
  EXPECT_EQ(cuda.destroyed, 1);
}
