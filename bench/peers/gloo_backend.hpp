// The harness's Backend (bench/common/backend.hpp) over Gloo's TCP transport: all-reduce with
// one of Gloo's classic algorithms (AllreduceRing, AllreduceRingChunked,
// AllreduceHalvingDoubling). Gloo's algorithms reduce in place, so the out-of-place column is a
// copy into the output followed by the in-place algorithm, which is what a Gloo user needs to
// get an out-of-place result.
#pragma once
#include <memory>
#include <string>

#include "backend.hpp"

namespace gloo {
class Context;
}

namespace kolo::peers {

class GlooBackend : public bench::Backend {
 public:
  // algorithm: "ring", "ring_chunked" or "halving_doubling"; context: a connected full mesh.
  GlooBackend(std::shared_ptr<gloo::Context> context, std::string algorithm, std::string transport_label);

  int rank() const override;
  int size() const override;
  std::string library() const override;
  void barrier() override;
  double reduce_double(double value, bench::Combine how) override;
  std::vector<char> allgather_bytes(const std::vector<char>& mine) override;
  std::unique_ptr<bench::PreparedRun> prepare(const bench::RunRequest& request) override;

 private:
  std::shared_ptr<gloo::Context> context_;
  std::string algorithm_;
  std::string transport_label_;
};

}  // namespace kolo::peers
