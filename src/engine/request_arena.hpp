// The transport requests of one collective, reused from one collective to the next: a
// collective posts a handful of sends and receives, and allocating each (or a std::deque's map
// and first block, as EngineComm once did) cost two heap allocations per call. Transports hold
// pointers to pending requests, so requests never move: they live in fixed blocks that are
// kept for the group's lifetime.
//
// reset() starts the next collective. It is safe once no request of the last one is pending in a
// transport: after success all are done, and after a failure the context has aborted, which
// fails and forgets every pending request.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "transports/transport.hpp"

namespace kolo::engine {

class RequestArena {
 public:
  // The first block now, with the group: a group whose small collectives all run on the direct
  // path (which posts no requests) would otherwise allocate it in the first collective handed
  // over to the engine, however late that comes (tests/engine/hot_path_alloc_test.cpp saw it
  // under load).
  RequestArena() {
    blocks_.push_back(std::make_unique<transport::Request[]>(kBlock));
    first_ = blocks_[0].get();
  }

  // A request for the next post (its string keeps its capacity: failing it later allocates
  // only if the text outgrows what an earlier failure left).
  transport::Request& next() {
    const size_t block = used_ / kBlock, slot = used_ % kBlock;
    transport::Request* r;
    if (block == 0) [[likely]] {  // the usual collective's handful: the first block, no lookup
      r = first_ + slot;
    } else {
      if (block == blocks_.size()) blocks_.push_back(std::make_unique<transport::Request[]>(kBlock));
      r = &blocks_[block][slot];
    }
    ++used_;
    r->state = transport::Request::State::idle;
    return *r;
  }
  transport::Request& operator[](size_t i) { return blocks_[i / kBlock][i % kBlock]; }
  const transport::Request& operator[](size_t i) const { return blocks_[i / kBlock][i % kBlock]; }
  size_t size() const { return used_; }
  void reset() { used_ = 0; }

 private:
  static constexpr size_t kBlock = 64;  // a ring step posts two; a 1,024-rank direct gather 2,046
  std::vector<std::unique_ptr<transport::Request[]>> blocks_;
  transport::Request* first_;  // blocks_[0], which never moves
  size_t used_ = 0;
};

}  // namespace kolo::engine
