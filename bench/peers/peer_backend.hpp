// What a peer library must provide for the shared sweep: its rank and size, a barrier, a small
// reduction and gather for the benchmark's own bookkeeping, and one run of a collective.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "peer_collectives.hpp"
#include "peer_types.hpp"

namespace kolo::peers {

// One run of one collective: everything a backend needs to set it up.
struct RunRequest {
  const CollectiveSpec* spec;
  ElementType type;
  ReduceKind op;  // reductions only
  int root;       // rooted collectives only
  Shape shape;
  bool in_place;
  Placement where;
};

// Runs the prepared collective once and returns when this rank's part is complete.
using RunOnce = std::function<void()>;

enum class Combine { sum, min, max };

class PeerBackend {
 public:
  virtual ~PeerBackend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The library and how it runs, for the preamble ("Open MPI v4.1.4 ...").
  virtual std::string library() const = 0;
  virtual void barrier() = 0;
  // Every rank gets the sum / minimum / maximum of `value` over all ranks.
  virtual double reduce_double(double value, Combine how) = 0;
  // Every rank's `mine` (the same length on every rank), concatenated in rank order.
  virtual std::vector<char> allgather_bytes(const std::vector<char>& mine) = 0;
  // Where the data of a run sits. The default is nccl-tests' layout; a library whose in-place
  // convention differs (MPI's reduce-scatter) overrides it.
  virtual Placement place(const CollectiveSpec& spec, const Shape& shape, size_t element_bytes, int root,
                          bool in_place, void* send_base, void* recv_base) const {
    return nccl_placement(spec, shape, element_bytes, rank(), root, in_place, send_base, recv_base);
  }
  // Sets up a run (outside the timing: Gloo builds its algorithm object here) and returns it.
  virtual RunOnce prepare(const RunRequest& request) = 0;
};

}  // namespace kolo::peers
