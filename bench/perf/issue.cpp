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

void issue(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where, size_t param_count,
           const RunParams& params, std::vector<WorkPtr>* out) {
  Buffer send = where.send;
  Buffer recv = where.recv;
  switch (spec.id) {
    case CollId::allreduce: {
      auto o = with_algorithm<AllreduceOptions>(params);
      o.op = params.op;
      out->push_back(group.allreduce(send, recv, o));
      return;
    }
    case CollId::broadcast: {
      auto o = with_algorithm<BroadcastOptions>(params);
      o.root = params.root;
      out->push_back(group.broadcast(recv, o));
      return;
    }
    case CollId::reduce: {
      auto o = with_algorithm<ReduceOptions>(params);
      o.op = params.op;
      o.root = params.root;
      out->push_back(group.reduce(send, recv, o));
      return;
    }
    case CollId::allgather: {
      send.count = param_count;
      out->push_back(group.allgather(send, recv, with_algorithm<AllgatherOptions>(params)));
      return;
    }
    case CollId::reducescatter: {
      auto o = with_algorithm<ReduceScatterOptions>(params);
      o.op = params.op;
      // kolo's count is per rank: the receive block.
      send.count = param_count * static_cast<size_t>(group.size());
      recv.count = param_count;
      out->push_back(group.reduce_scatter(send, recv, o));
      return;
    }
    case CollId::alltoall:
      out->push_back(group.alltoall(send, recv, with_algorithm<AllToAllOptions>(params)));
      return;
    case CollId::gather: {
      auto o = with_algorithm<GatherOptions>(params);
      o.root = params.root;
      send.count = param_count;
      out->push_back(group.gather(send, recv, o));
      return;
    }
    case CollId::scatter: {
      auto o = with_algorithm<ScatterOptions>(params);
      o.root = params.root;
      recv.count = param_count;
      out->push_back(group.scatter(send, recv, o));
      return;
    }
    case CollId::sendrecv: {
      // kolo posts point-to-point operations and lets them complete in the background, so
      // every rank can send first without deadlocking the ring.
      const int n = group.size();
      auto so = with_algorithm<SendOptions>(params);
      auto ro = with_algorithm<RecvOptions>(params);
      WorkPtr s = group.send(send, (group.rank() + 1) % n, so);
      WorkPtr r = group.recv(recv, (group.rank() + n - 1) % n, ro);
      out->push_back(std::move(s));
      out->push_back(std::move(r));
      return;
    }
  }
}

}  // namespace kolo::perf
