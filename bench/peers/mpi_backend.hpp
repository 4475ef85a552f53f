// The harness's Backend (bench/common/backend.hpp) over MPI (Open MPI here): the nine
// collectives as MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Alltoall, MPI_Gather, MPI_Scatter and MPI_Sendrecv(_replace) on MPI_COMM_WORLD, in place
// through MPI_IN_PLACE. Every MPI error is returned (MPI_ERRORS_RETURN) and thrown as
// MpiError, so main can print it and MPI_Abort the job instead of leaving peers waiting.
#pragma once
#include <stdexcept>
#include <string>

#include "backend.hpp"

namespace kolo::peers {

class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using bench::CollectiveSpec;
using bench::Combine;
using bench::Placement;
using bench::Shape;

class MpiBackend : public bench::Backend {
 public:
  // MPI_Init must have been called.
  MpiBackend();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string library() const override;
  void barrier() override;
  double reduce_double(double value, Combine how) override;
  std::vector<char> allgather_bytes(const std::vector<char>& mine) override;
  Placement place(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int root, bool in_place,
                  void* send_base, void* recv_base) const override;
  std::unique_ptr<bench::PreparedRun> prepare(const bench::RunRequest& request) override;

 private:
  // The blocking MPI call of one run, captured in a lambda (the peers' loop calls it through
  // std::function, bench::blocking_run).
  bench::RunOnce call(const bench::RunRequest& request) const;

  int rank_ = 0;
  int size_ = 1;
};

}  // namespace kolo::peers
