#include "kolo_backend.hpp"

#include <vector>

#include "timing_loop.hpp"

namespace kolo::perf {

using bench::CollId;
using bench::ElementType;
using bench::RedOp;

namespace {

// One collective call of a measured column, prepared once: its buffers and options are built
// before the timing starts, as the peers prepare theirs (a lambda that calls MPI_Allreduce and
// nothing else), so that the timed loop runs the call and its wait and nothing of the harness.
// Building them per call cost the harness ~150 instructions per call (a std::function, a switch,
// options with a std::string, a vector of Works) where Open MPI's peer spends ~30: a fifth of a
// small two-rank collective (docs/PERFORMANCE.md).
class PreparedCall {
 public:
  // device: -g 1's GPU (nullptr: host memory).
  PreparedCall(ProcessGroup& group, const bench::RunRequest& r, const std::string& algorithm,
               const bench::DeviceMemory* device);
  // Issues the collective once and appends its Works (two for sendrecv) to `out` (-z 0: many
  // in flight).
  void issue(std::vector<WorkPtr>* out) const;
  // Issues it and waits for it: what the waiting modes (-z 1-3), the warm-up and the checks do.
  void run_and_wait() const;

 private:
  ProcessGroup& group_;
  CollId id_;
  Buffer send_, recv_;  // with each collective's counts set (param_count)
  int next_ = 0, prev_ = 0;  // sendrecv's peers
  AllreduceOptions allreduce_;
  BroadcastOptions broadcast_;
  ReduceOptions reduce_;
  AllgatherOptions allgather_;
  ReduceScatterOptions reduce_scatter_;
  AllToAllOptions alltoall_;
  GatherOptions gather_;
  ScatterOptions scatter_;
  SendOptions send_options_;
  RecvOptions recv_options_;
};

PreparedCall::PreparedCall(ProcessGroup& group, const bench::RunRequest& r, const std::string& algorithm,
                           const bench::DeviceMemory* device)
    : group_(group),
      id_(r.spec->id),
      // kolo's counts are nccl-tests' (bench/common/collective_specs.hpp): reducescatter's send
      // holds every rank's block, its receive (like kolo's count) one block.
      send_(r.where.send, r.where.send_count, to_kolo(r.type),
            device ? Device::cuda(device->info().index) : Device::cpu()),
      recv_(r.where.recv, r.where.recv_count, to_kolo(r.type),
            device ? Device::cuda(device->info().index) : Device::cpu()) {
  for (CommonOptions* o : std::initializer_list<CommonOptions*>{&allreduce_, &broadcast_, &reduce_, &allgather_,
                                                                &reduce_scatter_, &alltoall_, &gather_, &scatter_,
                                                                &send_options_, &recv_options_}) {
    o->algorithm = algorithm;
    o->stream = device ? device->stream() : nullptr;  // ignored for host buffers
  }
  allreduce_.op = reduce_.op = reduce_scatter_.op = to_kolo(r.op);
  broadcast_.root = reduce_.root = gather_.root = scatter_.root = r.root;
  next_ = (group.rank() + 1) % group.size();
  prev_ = (group.rank() + group.size() - 1) % group.size();
}

void PreparedCall::issue(std::vector<WorkPtr>* out) const {
  switch (id_) {
    case CollId::allreduce: out->push_back(group_.allreduce(send_, recv_, allreduce_)); return;
    case CollId::broadcast: out->push_back(group_.broadcast(recv_, broadcast_)); return;
    case CollId::reduce: out->push_back(group_.reduce(send_, recv_, reduce_)); return;
    case CollId::allgather: out->push_back(group_.allgather(send_, recv_, allgather_)); return;
    case CollId::reducescatter: out->push_back(group_.reduce_scatter(send_, recv_, reduce_scatter_)); return;
    case CollId::alltoall: out->push_back(group_.alltoall(send_, recv_, alltoall_)); return;
    case CollId::gather: out->push_back(group_.gather(send_, recv_, gather_)); return;
    case CollId::scatter: out->push_back(group_.scatter(send_, recv_, scatter_)); return;
    case CollId::sendrecv: {
      // kolo posts point-to-point operations and lets them complete in the background, so
      // every rank can send first without deadlocking the ring.
      WorkPtr s = group_.send(send_, next_, send_options_);
      WorkPtr r = group_.recv(recv_, prev_, recv_options_);
      out->push_back(std::move(s));
      out->push_back(std::move(r));
      return;
    }
  }
}

void PreparedCall::run_and_wait() const {
  switch (id_) {
    case CollId::allreduce: group_.allreduce(send_, recv_, allreduce_)->wait(); return;
    case CollId::broadcast: group_.broadcast(recv_, broadcast_)->wait(); return;
    case CollId::reduce: group_.reduce(send_, recv_, reduce_)->wait(); return;
    case CollId::allgather: group_.allgather(send_, recv_, allgather_)->wait(); return;
    case CollId::reducescatter: group_.reduce_scatter(send_, recv_, reduce_scatter_)->wait(); return;
    case CollId::alltoall: group_.alltoall(send_, recv_, alltoall_)->wait(); return;
    case CollId::gather: group_.gather(send_, recv_, gather_)->wait(); return;
    case CollId::scatter: group_.scatter(send_, recv_, scatter_)->wait(); return;
    case CollId::sendrecv: {
      WorkPtr s = group_.send(send_, next_, send_options_);
      WorkPtr r = group_.recv(recv_, prev_, recv_options_);
      s->wait();
      r->wait();
      return;
    }
  }
}

// The timing loop's operations (bench/common/timing_loop.hpp) on one PreparedCall: pointers only,
// so that the loop, which takes it by value, holds them in registers. kDevice (-g 1): a device
// operation's wait() only makes the stream wait, so each wait is followed by synchronizing the
// stream before the loop reads the clock, as nccl-tests does; a template parameter, so that
// the host loop is the same code as before device memory.
template <bool kDevice>
struct KoloLoop {
  ProcessGroup* group;
  const PreparedCall* call;
  std::vector<WorkPtr>* pending;
  bench::DeviceMemory* device;

  void run_and_wait() const {
    call->run_and_wait();
    if constexpr (kDevice) device->synchronize_stream();
  }
  void issue() const { call->issue(pending); }
  void wait_issued() const {
    for (const WorkPtr& w : *pending) w->wait();
    if constexpr (kDevice) device->synchronize_stream();
  }
  void forget_issued() const { pending->clear(); }
  void reserve(size_t operations) const { pending->reserve(operations * 2); }  // sendrecv: two Works
  void barrier() const { group->barrier()->wait(); }
};

// The harness's view of a PreparedCall. Its timed loop is the harness's template over KoloLoop,
// so the only indirect call is PreparedRun::time, once per measured column.
class KoloRun final : public bench::PreparedRun {
 public:
  KoloRun(ProcessGroup& group, const bench::RunRequest& r, const std::string& algorithm, bench::DeviceMemory* device)
      : group_(group), call_(group, r, algorithm, device), device_(device) {}

  // The warm-up and the checks: device memory returns with the result there.
  void run_and_wait(int count) override {
    for (int i = 0; i < count; ++i) call_.run_and_wait();
    if (device_ != nullptr) device_->synchronize_stream();
  }
  double time(const bench::TimingRequest& t, std::vector<double>* iteration_seconds) override {
    if (device_ != nullptr)
      return bench::time_iterations(KoloLoop<true>{&group_, &call_, &pending_, device_}, t, iteration_seconds);
    return bench::time_iterations(KoloLoop<false>{&group_, &call_, &pending_, nullptr}, t, iteration_seconds);
  }

 private:
  ProcessGroup& group_;
  PreparedCall call_;
  bench::DeviceMemory* device_;
  std::vector<WorkPtr> pending_;  // -z 0: the Works in flight
};

}  // namespace

KoloBackend::KoloBackend(ProcessGroup& group, std::string algorithm, std::string library, bench::DeviceMemory* device)
    : group_(group), algorithm_(std::move(algorithm)), library_(std::move(library)), device_(device) {}

int KoloBackend::rank() const { return group_.rank(); }
int KoloBackend::size() const { return group_.size(); }

void KoloBackend::barrier() { group_.barrier()->wait(); }

double KoloBackend::reduce_double(double value, bench::Combine how) {
  AllreduceOptions o;
  o.op = how == bench::Combine::sum ? ReduceKind::sum : how == bench::Combine::min ? ReduceKind::min : ReduceKind::max;
  group_.allreduce(Buffer(&value, 1), o)->wait();
  return value;
}

std::vector<char> KoloBackend::allgather_bytes(const std::vector<char>& mine) {
  std::vector<char> all(mine.size() * static_cast<size_t>(group_.size()));
  // Buffer holds a plain pointer; allgather only reads its send buffer.
  group_.allgather(Buffer(const_cast<char*>(mine.data()), mine.size(), DataType::uint8),
                   Buffer(all.data(), all.size(), DataType::uint8))
      ->wait();
  return all;
}

bool KoloBackend::checkable(const bench::CollectiveSpec& spec, bool in_place) const {
  return !(in_place && spec.id == CollId::sendrecv);
}

std::unique_ptr<bench::PreparedRun> KoloBackend::prepare(const bench::RunRequest& request) {
  return std::make_unique<KoloRun>(group_, request, algorithm_, device_);
}

}  // namespace kolo::perf
