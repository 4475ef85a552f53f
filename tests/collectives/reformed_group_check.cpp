#include "reformed_group_check.hpp"

#include <cstdint>
#include <vector>

namespace kolo::coltest {

void check_reformed_group(WorkerContext& ctx, ProcessGroup& g, const std::string& how) {
  const int n = g.size(), r = g.rank();
  for (size_t count : {size_t{1000}, size_t{200000}}) {
    const std::string size = " of " + std::to_string(count) + " on the " + how + " group";
    ctx.log.begin_case("allreduce" + size);
    std::vector<int32_t> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = (r + 1) * 1000 + static_cast<int32_t>(i % 997);
    g.allreduce(Buffer(x.data(), count))->wait();
    ctx.log.expect_elements("sum", DataType::int32, x.data(), count, [&](size_t i) {
      return static_cast<long double>(1000LL * n * (n + 1) / 2 + static_cast<long long>(n) * static_cast<long long>(i % 997));
    });
    for (int root : {0, n - 1}) {
      ctx.log.begin_case("broadcast from " + std::to_string(root) + size);
      for (size_t i = 0; i < count; ++i) x[i] = r == root ? static_cast<int32_t>(i * 7 + static_cast<size_t>(root)) : -1;
      BroadcastOptions o;
      o.root = root;
      g.broadcast(Buffer(x.data(), count), o)->wait();
      ctx.log.expect_elements("value", DataType::int32, x.data(), count,
                              [&](size_t i) { return static_cast<long double>(i * 7 + static_cast<size_t>(root)); });
    }
    ctx.log.begin_case("allgather" + size);
    std::vector<int32_t> mine(count), all(count * static_cast<size_t>(n), -1);
    for (size_t i = 0; i < count; ++i) mine[i] = r * 100000 + static_cast<int32_t>(i % 50000);
    g.allgather(Buffer(mine.data(), count), Buffer(all.data(), all.size()))->wait();
    ctx.log.expect_elements("block", DataType::int32, all.data(), all.size(), [&](size_t k) {
      return static_cast<long double>(static_cast<long long>(k / count) * 100000 + static_cast<long long>((k % count) % 50000));
    });
  }
  ctx.log.end_case();
}

}  // namespace kolo::coltest
