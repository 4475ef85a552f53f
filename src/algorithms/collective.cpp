#include "algorithms/collective.hpp"

namespace kolo::algo {

const char* coll_name(CollKind k) {
  switch (k) {
    case CollKind::broadcast: return "broadcast";
    case CollKind::allreduce: return "allreduce";
    case CollKind::reduce: return "reduce";
    case CollKind::allgather: return "allgather";
    case CollKind::gather: return "gather";
    case CollKind::scatter: return "scatter";
    case CollKind::reduce_scatter: return "reduce_scatter";
    case CollKind::alltoall: return "alltoall";
    case CollKind::alltoallv: return "alltoallv";
    case CollKind::barrier: return "barrier";
    case CollKind::send: return "send";
    case CollKind::recv: return "recv";
  }
  return "unknown collective";
}

}  // namespace kolo::algo
