// ProcessGroupKolo: torch.distributed's backend interface over kolo::ProcessGroup, for CPU
// tensors. torch 1.x calls a c10d::ProcessGroup subclass; torch 2.x a c10d::Backend subclass
// (the ProcessGroup there dispatches to per-device backends). The methods are the same.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "kolo/process_group.hpp"
#include "monitored_barrier.hpp"
#include "shared_world.hpp"

namespace kolo_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif
using WorkRef = c10::intrusive_ptr<c10d::Work>;

class ProcessGroupKolo : public BackendBase {
 public:
  // Collective over the group: connects to every peer (two kolo groups: collectives, and
  // point-to-point, so that isend/irecv never wait behind a collective). Point-to-point is one
  // group, not a lane per direction: a receive from any source must see every peer's messages.
  // `world_rank`: this rank in torch's default group when one exists (the backend is then a
  // subgroup's, which may share the world's connections: KOLO_SPLIT_SHARE), else -1.
  ProcessGroupKolo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, int world_rank = -1);
  // The backend over groups a shrink already connected (shrink.cpp).
  ProcessGroupKolo(const KoloGroups& groups, std::chrono::milliseconds timeout);
  ~ProcessGroupKolo() override;

  // Lose ranks, keep going (shrink.cpp): both kolo groups shrink (ProcessGroup::shrink), this
  // backend's operations fail from then on, and the survivors get a backend over the new groups.
  // `exclude` unset: whoever answers within `timeout` survives (kolo's agreement); set: exactly
  // the ranks not named (all survivors pass the same list). `members`: the survivors' ranks in
  // this group, in the new group's rank order. An excluded rank gets an error saying so.
  struct Shrunk {
    c10::intrusive_ptr<ProcessGroupKolo> backend;
    std::vector<int> members;
  };
  Shrunk shrink_survivors(const std::optional<std::vector<int>>& exclude, std::chrono::milliseconds timeout);
  // Grow back (grow.cpp). On the members: ProcessGroup::grow of the collectives' group
  // (collective over this group, at a point every member reaches); null when nobody was let in.
  // Else the grown backend (members keep their ranks, joiners follow), whose point-to-point group
  // is split off the grown one; this backend's groups are shut down (collective over the old
  // members) and its operations fail from then on.
  c10::intrusive_ptr<ProcessGroupKolo> grow_members(const kolo::GrowOptions& opts);
  // On a process that was not in the group (a replacement): waits up to `wait` (0: `timeout`) in
  // the queue of the world backend's collectives' group under `store` (the store torch handed
  // the members' world backend) until their grow() admits it, and returns its backend.
  static c10::intrusive_ptr<ProcessGroupKolo> join_world(const c10::intrusive_ptr<c10d::Store>& store,
                                                         std::chrono::milliseconds timeout,
                                                         std::chrono::milliseconds wait);
  int generation() const;  // of the collectives' group: 0 at launch, +1 per shrink or grow

#ifdef KOLO_TORCH_BACKEND_SHRINK
  // torch's hook (torch.distributed.shrink_group, torch >= the version whose Backend.hpp has it,
  // found by meson): the named form over the group's timeout, or opts_override's when given.
  // Both shrink flags mean the same here: kolo always aborts the old group first.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags = 0,
                                           const c10::intrusive_ptr<Options>& opts_override = nullptr) override;
#endif

  const std::string getBackendName() const override { return "kolo"; }

  WorkRef broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts = {}) override;
  WorkRef allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts = {}) override;
  // A sparse COO tensor (allreduce hands it here too, as torch 1.13 and 2.x's CPU dispatch
  // call allreduce for it): SUM only, as gloo; runs at issue (sparse.hpp).
  WorkRef allreduce_sparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts = {})
#if TORCH_VERSION_MAJOR >= 2
      override
#endif
      ;
  WorkRef allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts = {}) override;
  WorkRef reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts = {}) override;
  WorkRef allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts = {}) override;
  WorkRef _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts = {}) override;
  WorkRef allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts = {}) override;
  WorkRef gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts = {}) override;
  WorkRef scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts = {}) override;
  WorkRef reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts = {}) override;
  WorkRef _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts = {}) override;
  WorkRef alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts = {}) override;
  WorkRef alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts = {}) override;
  WorkRef barrier(const c10d::BarrierOptions& opts = {}) override;
  // dist.monitored_barrier (torch 2.x: any backend with a CPU device; torch 1.13's Python
  // refuses every backend but gloo, there call group.monitored_barrier(timeout)): rank 0
  // raises naming the first rank (every rank: wait_all_ranks) that did not arrive in time.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;
  WorkRef send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  WorkRef recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  WorkRef recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
#if TORCH_VERSION_MAJOR >= 2
  WorkRef allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts = {}) override;
  WorkRef reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts = {}) override;
#endif

 private:
  // The group that carries point-to-point traffic from rank `from` to rank `to`: one for all
  // (kolo posts sends and receives at once, in the background; they never wait for each other).
  kolo::ProcessGroup& lane(int, int) const { return *p2p_; }

  std::chrono::milliseconds timeout_;        // the group's (monitored barrier's default)
  MonitoredBarrierState barrier_tensors_;    // what a monitored barrier left posted
  std::shared_ptr<kolo::ProcessGroup> pg_;   // collectives
  std::shared_ptr<kolo::ProcessGroup> p2p_;  // send, recv, recv from any source
};

}  // namespace kolo_torch
