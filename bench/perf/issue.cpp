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

int sendrecv_source_of_sent_data(int rank, bool in_place) { return (in_place && rank % 2 == 1) ? rank - 1 : rank; }

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
      const int n = group.size();
      const int next = (group.rank() + 1) % n;
      const int prev = (group.rank() + n - 1) % n;
      auto so = with_algorithm<SendOptions>(params);
      auto ro = with_algorithm<RecvOptions>(params);
      if (group.rank() % 2 == 1) {
        WorkPtr r = group.recv(recv, prev, ro);
        WorkPtr s = group.send(send, next, so);
        return {r, s};
      }
      WorkPtr s = group.send(send, next, so);
      WorkPtr r = group.recv(recv, prev, ro);
      return {s, r};
    }
  }
  return {};
}

}  // namespace kolo::perf
