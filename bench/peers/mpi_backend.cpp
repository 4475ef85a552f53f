#include "mpi_backend.hpp"

#include <mpi.h>

#include <climits>

namespace kolo::peers {
namespace {

using bench::CollId;
using bench::ElementType;
using bench::RedOp;

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

MPI_Datatype mpi_type(ElementType t) {
  switch (t) {
    case ElementType::int8: return MPI_INT8_T;
    case ElementType::uint8: return MPI_UINT8_T;
    case ElementType::int32: return MPI_INT32_T;
    case ElementType::uint32: return MPI_UINT32_T;
    case ElementType::int64: return MPI_INT64_T;
    case ElementType::uint64: return MPI_UINT64_T;
    case ElementType::float32: return MPI_FLOAT;
    case ElementType::float64: return MPI_DOUBLE;
    case ElementType::float16:
    case ElementType::bfloat16: break;  // refused by the command line: MPI has neither
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(RedOp op) {
  switch (op) {
    case RedOp::sum: return MPI_SUM;
    case RedOp::prod: return MPI_PROD;
    case RedOp::min: return MPI_MIN;
    case RedOp::max: return MPI_MAX;
    default: return MPI_OP_NULL;  // refused by the command line: kolo-only operators
  }
}

// MPI counts are int: refuse what does not fit instead of wrapping.
int mpi_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw MpiError("count " + std::to_string(count) + " does not fit MPI's int count");
  return static_cast<int>(count);
}

}  // namespace

MpiBackend::MpiBackend() {
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

std::string MpiBackend::library() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  // Open MPI's string runs on ("v4.1.4, package: ..., ident: ..."): its first clause names it.
  const size_t comma = version.find(',');
  if (comma != std::string::npos) version.resize(comma);
  while (!version.empty() && (version.back() == '\n' || version.back() == ' ')) version.pop_back();
  return version + ", MPI_COMM_WORLD";
}

void MpiBackend::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

double MpiBackend::reduce_double(double value, Combine how) {
  double result = 0;
  const MPI_Op op = how == Combine::sum ? MPI_SUM : how == Combine::min ? MPI_MIN : MPI_MAX;
  check_mpi(MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, op, MPI_COMM_WORLD), "MPI_Allreduce");
  return result;
}

std::vector<char> MpiBackend::allgather_bytes(const std::vector<char>& mine) {
  std::vector<char> all(mine.size() * static_cast<size_t>(size_));
  const int count = mpi_count(mine.size());
  check_mpi(MPI_Allgather(mine.data(), count, MPI_CHAR, all.data(), count, MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgather");
  return all;
}

Placement MpiBackend::place(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int root,
                            bool in_place, void* send_base, void* recv_base) const {
  Placement p = bench::nccl_placement(spec, shape, element_bytes, rank_, root, in_place, send_base, recv_base);
  // MPI_Reduce_scatter_block with MPI_IN_PLACE reads the whole receive buffer and leaves this
  // rank's result at its start, not at this rank's block as NCCL does.
  if (spec.id == CollId::reducescatter && in_place) p.recv = recv_base;
  return p;
}

std::unique_ptr<bench::PreparedRun> MpiBackend::prepare(const bench::RunRequest& request) {
  return bench::blocking_run(call(request));
}

bench::RunOnce MpiBackend::call(const bench::RunRequest& r) const {
  const MPI_Datatype type = mpi_type(r.type);
  const MPI_Op op = mpi_op(r.op);
  const int count = mpi_count(r.shape.param_count);
  void* send = r.where.send;
  void* recv = r.where.recv;
  const int root = r.root;
  const bool in_place = r.in_place;
  const bool is_root = rank_ == root;
  switch (r.spec->id) {
    case CollId::allreduce:
      return [=] {
        check_mpi(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, count, type, op, MPI_COMM_WORLD),
                  "MPI_Allreduce");
      };
    case CollId::broadcast:
      // One buffer: the root's send buffer out-of-place, everyone's receive buffer in place.
      return [=] { check_mpi(MPI_Bcast(recv, count, type, root, MPI_COMM_WORLD), "MPI_Bcast"); };
    case CollId::reduce:
      // MPI_IN_PLACE is the root's alone; the other ranks send from the (shared) buffer.
      return [=] {
        const void* source = in_place && is_root ? MPI_IN_PLACE : send;
        check_mpi(MPI_Reduce(source, recv, count, type, op, root, MPI_COMM_WORLD), "MPI_Reduce");
      };
    case CollId::allgather:
      return [=] {
        check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : send, count, type, recv, count, type, MPI_COMM_WORLD),
                  "MPI_Allgather");
      };
    case CollId::reducescatter:
      return [=] {
        check_mpi(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, count, type, op, MPI_COMM_WORLD),
                  "MPI_Reduce_scatter_block");
      };
    case CollId::alltoall:
      return [=] {
        check_mpi(MPI_Alltoall(in_place ? MPI_IN_PLACE : send, count, type, recv, count, type, MPI_COMM_WORLD),
                  "MPI_Alltoall");
      };
    case CollId::gather:
      // MPI_IN_PLACE is the root's alone: its block already sits in the result.
      return [=] {
        const void* source = in_place && is_root ? MPI_IN_PLACE : send;
        check_mpi(MPI_Gather(source, count, type, recv, count, type, root, MPI_COMM_WORLD), "MPI_Gather");
      };
    case CollId::scatter:
      // In place the root keeps its block where it is (in the input, where recv points).
      return [=] {
        void* target = in_place && is_root ? MPI_IN_PLACE : recv;
        check_mpi(MPI_Scatter(send, count, type, target, count, type, root, MPI_COMM_WORLD), "MPI_Scatter");
      };
    case CollId::sendrecv: {
      // nccl-tests' sendrecv: a ring, every rank sends to the next and receives from the previous.
      const int next = (rank_ + 1) % size_;
      const int prev = (rank_ + size_ - 1) % size_;
      if (in_place) {
        return [=] {
          check_mpi(MPI_Sendrecv_replace(recv, count, type, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    "MPI_Sendrecv_replace");
        };
      }
      return [=] {
        check_mpi(MPI_Sendrecv(send, count, type, next, 0, recv, count, type, prev, 0, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
      };
    }
  }
  throw MpiError("unknown collective");
}

}  // namespace kolo::peers
