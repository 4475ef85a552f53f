#include "issue.hpp"

namespace kolo::perf {
namespace {

template <class Options>
Options with_algorithm(const RunParams& params) {
  Options o;
  o.algorithm = params.algorithm;
  return o;
}

}  // namespace

bool checkable(const CollectiveSpec& spec, bool in_place) { return !(in_place && spec.id == CollId::sendrecv); }

std::vector<WorkPtr> issue(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where,
                           size_t param_count, const RunParams& params) {
  Buffer send = where.send;
  Buffer recv = where.recv;
  switch (spec.id) {
    case CollId::allreduce: {
      auto o = with_algorithm<AllreduceOptions>(params);
      o.op = params.op;
      return {group.allreduce(send, recv, o)};
    }
    case CollId::broadcast: {
      auto o = with_algorithm<BroadcastOptions>(params);
      o.root = params.root;
      return {group.broadcast(recv, o)};
    }
    case CollId::reduce: {
      auto o = with_algorithm<ReduceOptions>(params);
      o.op = params.op;
      o.root = params.root;
      return {group.reduce(send, recv, o)};
    }
    case CollId::allgather: {
      send.count = param_count;
      return {group.allgather(send, recv, with_algorithm<AllgatherOptions>(params))};
    }
    case CollId::reducescatter: {
      auto o = with_algorithm<ReduceScatterOptions>(params);
      o.op = params.op;
      // kolo's count is per rank: the receive block.
      send.count = param_count * static_cast<size_t>(group.size());
      recv.count = param_count;
      return {group.reduce_scatter(send, recv, o)};
    }
    case CollId::alltoall:
      return {group.alltoall(send, recv, with_algorithm<AllToAllOptions>(params))};
    case CollId::gather: {
      auto o = with_algorithm<GatherOptions>(params);
      o.root = params.root;
      send.count = param_count;
      return {group.gather(send, recv, o)};
    }
    case CollId::scatter: {
      auto o = with_algorithm<ScatterOptions>(params);
      o.root = params.root;
      recv.count = param_count;
      return {group.scatter(send, recv, o)};
    }
    case CollId::sendrecv: {
      // kolo posts point-to-point operations and lets them complete in the background, so
      // every rank can send first without deadlocking the ring.
      const int n = group.size();
      auto so = with_algorithm<SendOptions>(params);
      auto ro = with_algorithm<RecvOptions>(params);
      WorkPtr s = group.send(send, (group.rank() + 1) % n, so);
      WorkPtr r = group.recv(recv, (group.rank() + n - 1) % n, ro);
      return {s, r};
    }
  }
  return {};
}

}  // namespace kolo::perf
