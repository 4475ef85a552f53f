#include "engine/device_direct.hpp"

#include <cstring>
#include <thread>

#include "common/config.hpp"
#include "common/log.hpp"
#include "engine/work_access.hpp"
#include "kolo/error.hpp"

namespace kolo::engine {

using algo::CollKind;

void DirectDevice::configure(std::shared_ptr<Store> store, std::string prefix, int rank, int size, bool one_host,
                             bool owns_connections, std::chrono::milliseconds timeout,
                             std::function<std::string()> stop_check) {
  std::lock_guard<std::mutex> lk(mu_);
  enabled_ = config::get_int("KOLO_CUDA_IPC") != 0 && transport::device_collectives_built() && one_host &&
             owns_connections && size > 1;
  min_bytes_ = static_cast<size_t>(config::get_int("KOLO_CUDA_IPC_MIN_BYTES"));
  store_ = std::move(store);
  prefix_ = std::move(prefix);
  rank_ = rank;
  size_ = size;
  timeout_ = timeout;
  stop_check_ = std::move(stop_check);
}

bool DirectDevice::wants(const algo::CollArgs& a, kernels::DeviceRuntime& rt) const {
  if (!enabled_ || broken_) return false;
  if (std::strcmp(rt.name(), "cuda") != 0) return false;  // the host stand-in has no IPC
  // The sums cuda_ipc's kernels do (transports/cuda_ipc/allreduce_kernels.hpp).
  const bool summable = a.op.kind == ReduceKind::sum &&
                        (a.dtype == DataType::float32 || a.dtype == DataType::float16 || a.dtype == DataType::bfloat16);
  switch (a.kind) {
    case CollKind::allreduce:
    case CollKind::reduce:
    case CollKind::reduce_scatter:
      if (!summable) return false;
      break;
    case CollKind::allgather:
    case CollKind::broadcast:
    case CollKind::alltoall:
    case CollKind::gather:
    case CollKind::scatter:
      break;
    default:
      return false;
  }
  // Nothing here may depend on this rank's buffers (in place or not): every rank must take the
  // same path, or one waits for the others on the wrong one. The in-place forms run over IPC too.
  return a.count * a.elem_size() >= min_bytes_;
}

WorkPtr DirectDevice::run(const algo::CollArgs& a, kernels::DeviceRuntime& rt, void* stream, uint64_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  const char* name = algo::coll_name(a.kind);
  try {
    if (broken_) throw Error("the group's CUDA IPC path failed earlier");
    if (!comm_) {
      transport::DeviceCollectivesOptions o;
      o.prefix = prefix_ + "/cuda_ipc";
      o.timeout = timeout_;
      o.stop_check = stop_check_;
      comm_ = transport::make_device_collectives(store_, rank_, size_, o);
      if (!comm_) throw Error("this build has no device collectives");
      KOLO_LOG(info, "group " << prefix_ << ": device memory of " << min_bytes_
                              << " bytes and more moves over " << comm_->name());
    }
    const size_t n = a.count;
    switch (a.kind) {
      case CollKind::allreduce: comm_->all_reduce(a.send, a.recv, n, a.dtype, stream); break;
      case CollKind::reduce: comm_->reduce(a.send, a.recv, n, a.dtype, a.root, stream); break;
      case CollKind::reduce_scatter: comm_->reduce_scatter(a.send, a.recv, n, a.dtype, stream); break;
      case CollKind::allgather: comm_->all_gather(a.send, a.recv, n, a.dtype, stream); break;
      case CollKind::broadcast: comm_->broadcast(const_cast<void*>(a.send), n, a.dtype, a.root, stream); break;
      case CollKind::alltoall: comm_->all_to_all(a.send, a.recv, n, a.dtype, stream); break;
      case CollKind::gather: comm_->gather(a.send, a.recv, n, a.dtype, a.root, stream); break;
      case CollKind::scatter: comm_->scatter(a.send, a.recv, n, a.dtype, a.root, stream); break;
      default: throw Error("not a direct device collective");
    }
  } catch (const std::exception& e) {
    // The same error kind, named with the operation, its number and this rank.
    broken_ = true;
    if (comm_) comm_->abort();  // peers waiting for this rank's next phase stop now
    const std::string what = std::string("kolo: ") + name + " #" + std::to_string(seq) + " on device memory (rank " +
                             std::to_string(rank_) + ", CUDA IPC): " + e.what();
    if (auto* t = dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(what, t->peer_rank());
    if (auto* p = dynamic_cast<const PeerError*>(&e)) throw PeerError(what, p->peer_rank());
    if (dynamic_cast<const InvalidArgument*>(&e)) throw InvalidArgument(what);
    throw Error(what);
  }
  auto w = WorkAccess::make_derived<DirectDeviceWork>(name, seq, rt, stream);
  WorkAccess::finish(*w, nullptr);
  return w;
}

void DirectDevice::close(bool orderly) noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  if (!comm_) return;
  try {
    if (orderly && !broken_) comm_->close();
  } catch (const std::exception& e) {
    KOLO_LOG(warn, "closing the CUDA IPC communicator of group " << prefix_ << " failed: " << e.what());
  }
  comm_.reset();
}

DirectDeviceWork::DirectDeviceWork(Work::Token token, const char* op_name, uint64_t seq, kernels::DeviceRuntime& rt,
                                   void* stream)
    : Work(token, op_name, seq), rt_(rt), stream_(stream), event_(rt.create_event()) {
  WorkAccess::set_device(*this, this);
  rt_.record(event_, stream_);
}

DirectDeviceWork::~DirectDeviceWork() {
  try {
    rt_.destroy_event(event_);  // CUDA frees it once the stream has passed it
  } catch (...) {
  }
}

void DirectDeviceWork::queue_wait(void* stream) {
  if (stream != stream_) rt_.stream_wait(stream, event_);  // the issuing stream is behind it already
}

void DirectDeviceWork::synchronize_gpu(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int i = 0; !rt_.done(event_); ++i) {
    if (timeout.count() >= 0 && std::chrono::steady_clock::now() >= deadline)
      throw TimeoutError("kolo: " + op_name() + " #" + std::to_string(seq()) +
                         " on device memory: the GPU did not finish it within " + std::to_string(timeout.count()) + " ms");
    if (i < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool DirectDeviceWork::gpu_done() const { return rt_.done(event_); }

}  // namespace kolo::engine
