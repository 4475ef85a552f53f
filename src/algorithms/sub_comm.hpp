// A Comm over some of a collective's ranks, running one phase of a composite algorithm (the
// hierarchical ones: inside a host, then across hosts) with arguments of its own. Sub-rank i
// is parent rank ranks[i]. Messages go through the parent, so they carry the parent
// collective's sequence number and fingerprint, and the per-pair ordering rule holds as long
// as every rank runs the phases in the same order (it does: the phases are sequential).
#pragma once
#include <vector>

#include "algorithms/comm.hpp"

namespace kolo::algo {

class SubComm final : public Comm {
 public:
  // `slot_base` keeps this phase's scratch slots apart from the other phases' (a slot asked
  // for again with a bigger size would move, and the parent may still hold pointers into an
  // earlier phase's memory). With `finalizes` false, finalize() does nothing: the phase's
  // result is partial (an intra-host reduction) and the parent finalizes it later, once.
  SubComm(Comm& parent, std::vector<int> ranks, int my_index, const CollArgs& args, int slot_base, bool finalizes);

  int rank() const override { return me_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const CollArgs& args() const override { return args_; }
  const HostLayout& hosts() const override { return hosts_; }
  Req isend(int peer, const void* buf, size_t bytes) override { return parent_.isend(to_parent(peer), buf, bytes); }
  Req irecv(int peer, void* buf, size_t bytes) override { return parent_.irecv(to_parent(peer), buf, bytes); }
  void wait(Req r) override { parent_.wait(r); }
  bool test(Req r) override { return parent_.test(r); }
  void reduce(void* dst, const void* src, size_t count) override { parent_.reduce(dst, src, count); }
  void reduce(void* dst, const void* a, const void* b, size_t count) override { parent_.reduce(dst, a, b, count); }
  void finalize(void* data, size_t count) override {
    if (finalizes_) parent_.finalize(data, count);
  }
  void* scratch(size_t bytes, int slot) override { return parent_.scratch(bytes, slot_base_ + slot); }
  void* temp(size_t bytes) override { return parent_.temp(bytes); }
  size_t chunk_bytes() const override { return parent_.chunk_bytes(); }

 private:
  int to_parent(int peer) const;

  Comm& parent_;
  std::vector<int> ranks_;
  int me_;
  CollArgs args_;
  HostLayout hosts_;
  int slot_base_;
  bool finalizes_;
};

}  // namespace kolo::algo
