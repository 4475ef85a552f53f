#include "algorithms/rank_order_reduce.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "algorithms/partition.hpp"

namespace kolo::algo {

void reduce_in_rank_order(Comm& comm, void* dst, std::span<const void*> blocks, std::span<Req> arrivals,
                          size_t count, void* spare) {
  const size_t n = blocks.size();
  if (n == 0 || arrivals.size() != n) throw std::logic_error("kolo: reduce_in_rank_order needs one arrival per block");
  const size_t bytes = count * comm.args().elem_size();
  auto arrive = [&](size_t i) {
    if (arrivals[i].valid()) comm.wait(arrivals[i]);
    arrivals[i] = Req{};
  };
  // Blocks 0 and 1 are read by the first reduction itself, which may write over either; any
  // later block that is dst would be gone by its turn.
  for (size_t i = 2; i < n; ++i) {
    if (blocks[i] == dst && bytes != 0) {
      arrive(i);
      std::memcpy(spare, blocks[i], bytes);
      blocks[i] = spare;
    }
  }
  arrive(0);
  if (n == 1) {
    copy_unless_same(dst, blocks[0], bytes);
  } else {
    arrive(1);
    comm.reduce(dst, blocks[0], blocks[1], count);
    for (size_t i = 2; i < n; ++i) {
      arrive(i);
      comm.reduce(dst, blocks[i], count);
    }
  }
  comm.finalize(dst, count);
}

void reduce_arrived_in_tiles(Comm& comm, void* dst, std::span<const void*> blocks, size_t count, size_t tile,
                             void* spare) {
  const size_t n = blocks.size();
  if (n == 0 || tile == 0) throw std::logic_error("kolo: reduce_arrived_in_tiles needs a block and a tile");
  const size_t es = comm.args().elem_size();
  // Only a block at index 2 or later is read after the first operation has written dst.
  size_t saved = n;
  for (size_t i = 2; i < n; ++i)
    if (blocks[i] == dst) saved = i;
  for (size_t off = 0; off < count; off += tile) {
    const size_t m = std::min(tile, count - off);
    const size_t at = off * es;
    char* d = static_cast<char*>(dst) + at;
    auto block = [&](size_t i) -> const char* {
      return i == saved ? static_cast<const char*>(spare) : static_cast<const char*>(blocks[i]) + at;
    };
    if (saved < n) std::memcpy(spare, d, m * es);
    if (n == 1) {
      copy_unless_same(d, block(0), m * es);
    } else {
      comm.reduce(d, block(0), block(1), m);
      for (size_t i = 2; i < n; ++i) comm.reduce(d, block(i), m);
    }
    comm.finalize(d, m);  // while the tile is still in the cache
  }
}

}  // namespace kolo::algo
