#include "issue.hpp"

namespace kolo::perf {

bool checkable(const CollectiveSpec& spec, bool in_place) { return !(in_place && spec.id == CollId::sendrecv); }

PreparedCall::PreparedCall(ProcessGroup& group, const CollectiveSpec& spec, const Placement& where, size_t param_count,
                           const RunParams& params)
    : group_(group), id_(spec.id), send_(where.send), recv_(where.recv) {
  for (CommonOptions* o : std::initializer_list<CommonOptions*>{&allreduce_, &broadcast_, &reduce_, &allgather_,
                                                                &reduce_scatter_, &alltoall_, &gather_, &scatter_,
                                                                &send_options_, &recv_options_})
    o->algorithm = params.algorithm;
  allreduce_.op = reduce_.op = reduce_scatter_.op = params.op;
  broadcast_.root = reduce_.root = gather_.root = scatter_.root = params.root;
  switch (id_) {
    case CollId::allgather:
    case CollId::gather:
      send_.count = param_count;
      break;
    case CollId::reducescatter:
      // kolo's count is per rank: the receive block.
      send_.count = param_count * static_cast<size_t>(group.size());
      recv_.count = param_count;
      break;
    case CollId::scatter:
      recv_.count = param_count;
      break;
    default:
      break;
  }
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

}  // namespace kolo::perf
