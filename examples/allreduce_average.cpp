// The smallest useful kolo program: every rank contributes a vector, all of them end up with the
// average. Run with: build/tools/kolorun/kolorun -n 4 build/examples/kolo-example-allreduce
#include <kolo/kolo.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto pg = kolo::init_from_env();
    const int rank = pg->rank(), size = pg->size();
    std::vector<float> grad(1000, static_cast<float>(rank));  // rank r contributes r everywhere
    kolo::AllreduceOptions opts;
    opts.op = kolo::ReduceKind::avg;
    pg->allreduce(kolo::Buffer(grad.data(), grad.size()), opts)->wait();
    const float expected = static_cast<float>(size - 1) / 2.0f;  // mean of 0..size-1
    for (float g : grad)
      if (g != expected) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", rank, g, expected);
        return 1;
      }
    if (rank == 0) std::printf("average over %d ranks: %g (correct)\n", size, expected);
    pg->shutdown();
    return 0;
  } catch (const kolo::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
