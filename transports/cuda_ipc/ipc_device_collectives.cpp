// IpcComm as the engine's DeviceCollectives (transports/device_collectives.hpp): registered when
// CUDA is built. All-reduce picks its algorithm by size: one-shot below KOLO_CUDA_IPC_TWO_SHOT_BYTES
// (every rank reads every input: one kernel, the fewest steps), two-shot-push from there (each
// input read once, each output written once: the least memory traffic, made for ranks sharing
// one GPU's memory). The choice depends on the size alone, the same on every rank.
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/ipc_comm.hpp"
#include "transports/device_collectives.hpp"

namespace kolo::cuda_ipc {
namespace {

IpcComm::Options::Ordering ordering_setting() {
  const std::string v = config::get_string("KOLO_CUDA_IPC_ORDERING");
  if (v == "events") return IpcComm::Options::Ordering::events;
  if (v == "flags") return IpcComm::Options::Ordering::flags;
  if (v == "host") return IpcComm::Options::Ordering::host;
  throw InvalidArgument("KOLO_CUDA_IPC_ORDERING=" + v + ": expected events, flags or host");
}

class IpcDeviceCollectives final : public transport::DeviceCollectives {
 public:
  IpcDeviceCollectives(std::shared_ptr<Store> store, int rank, int world, const transport::DeviceCollectivesOptions& o)
      : comm_(std::move(store), rank, world, options(o)),
        two_shot_bytes_(static_cast<size_t>(config::get_int("KOLO_CUDA_IPC_TWO_SHOT_BYTES"))) {}

  const char* name() const override { return "cuda_ipc"; }
  bool supports_sum(DataType t) const override { return allreduce_supports(t); }
  void all_reduce(const void* in, void* out, size_t count, DataType t, void* stream) override {
    // By size alone: every rank must choose the same algorithm, and in or out of place may
    // differ between ranks.
    const bool small = count * element_size(t) < two_shot_bytes_;
    comm_.all_reduce(in, out, count, t, small ? Algo::kOneShot : Algo::kTwoShotPush, s(stream));
  }
  void reduce_scatter(const void* in, void* out, size_t count, DataType t, void* stream) override {
    comm_.reduce_scatter(in, out, count, t, s(stream));
  }
  void all_gather(const void* in, void* out, size_t count, DataType t, void* stream) override {
    comm_.all_gather(in, out, count, t, s(stream));
  }
  void broadcast(void* buf, size_t count, DataType t, int root, void* stream) override {
    comm_.broadcast(buf, count, t, root, s(stream));
  }
  void reduce(const void* in, void* out, size_t count, DataType t, int root, void* stream) override {
    comm_.reduce(in, out, count, t, root, s(stream));
  }
  void all_to_all(const void* in, void* out, size_t count, DataType t, void* stream) override {
    comm_.all_to_all(in, out, count, t, s(stream));
  }
  void gather(const void* in, void* out, size_t count, DataType t, int root, void* stream) override {
    comm_.gather(in, out, count, t, root, s(stream));
  }
  void scatter(const void* in, void* out, size_t count, DataType t, int root, void* stream) override {
    comm_.scatter(in, out, count, t, root, s(stream));
  }
  void forget(const void* ptr) override { comm_.deregister(ptr); }
  void abort() noexcept override { comm_.abort(); }
  void close() override { comm_.close(); }

 private:
  static IpcComm::Options options(const transport::DeviceCollectivesOptions& o) {
    IpcComm::Options io;
    io.prefix = o.prefix;
    io.timeout = o.timeout;
    io.stop_check = o.stop_check;
    io.ordering = ordering_setting();
    return io;
  }
  static cudaStream_t s(void* stream) { return static_cast<cudaStream_t>(stream); }

  IpcComm comm_;
  size_t two_shot_bytes_;
};

std::unique_ptr<transport::DeviceCollectives> make(std::shared_ptr<Store> store, int rank, int world,
                                                   const transport::DeviceCollectivesOptions& o) {
  return std::make_unique<IpcDeviceCollectives>(std::move(store), rank, world, o);
}

KOLO_REGISTER_DEVICE_COLLECTIVES(&make);

}  // namespace
}  // namespace kolo::cuda_ipc
