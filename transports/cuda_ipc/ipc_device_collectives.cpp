// IpcComm as the engine's DeviceCollectives (transports/device_collectives.hpp): registered when
// CUDA is built. All-reduce runs the algorithm the cost model (ipc_cost_model.hpp) predicts
// fastest, or the one KOLO_CUDA_IPC_ALGO names. The model's inputs are the same on every rank
// (the size, the number of ranks, the placement on GPUs IpcComm agreed on, the ordering and the
// parameters, which every rank must set alike), never whether this rank's buffers are in place
// or exportable: so every rank chooses the same, and IpcComm's descriptor check fails a call on
// which they do not (a rank set another KOLO_CUDA_IPC_ALGO or KOLO_CUDA_IPC_MODEL).
#include <optional>

#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/cuda_ipc/allreduce_kernels.hpp"
#include "transports/cuda_ipc/ipc_cost_model.hpp"
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
      : forced_(algo_by_name(config::get_string("KOLO_CUDA_IPC_ALGO"), "KOLO_CUDA_IPC_ALGO")),
        model_(IpcModelParams::from_config()),
        comm_(std::move(store), rank, world, options(o)) {}

  const char* name() const override { return "cuda_ipc"; }
  bool supports_sum(DataType t) const override { return allreduce_supports(t); }
  void all_reduce(const void* in, void* out, size_t count, DataType t, void* stream) override {
    // Not on in or out of place, which may differ between ranks: every rank must choose the same.
    const Algo algo =
        forced_ ? *forced_ : choose_algo(count * element_size(t), comm_.placement(), comm_.ordering(), model_);
    comm_.all_reduce(in, out, count, t, algo, s(stream));
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

  // Read before the communicator is built, so that a bad setting fails before any handshake.
  std::optional<Algo> forced_;
  IpcModelParams model_;
  IpcComm comm_;
};

std::unique_ptr<transport::DeviceCollectives> make(std::shared_ptr<Store> store, int rank, int world,
                                                   const transport::DeviceCollectivesOptions& o) {
  return std::make_unique<IpcDeviceCollectives>(std::move(store), rank, world, o);
}

KOLO_REGISTER_DEVICE_COLLECTIVES(&make);

}  // namespace
}  // namespace kolo::cuda_ipc
