// kolo-ipc-test, the other collectives: reduce-scatter, all-gather, broadcast, reduce,
// all-to-all, gather and scatter, every element, both roots, in place where allowed.
#include "ipc_test_support.hpp"

#include <cuda_runtime.h>

#include <cstring>

namespace ipc_test {

std::string collective_case(IpcComm& comm, const std::string& kind, DataType t, size_t count, int root, bool in_place,
                            cudaStream_t s) {
  const size_t es = kolo::dtype_size(t), n = static_cast<size_t>(g_world);
  const size_t big = count * n;
  DeviceBuffer in(big * es), out(big * es);
  check(cudaMemsetAsync(out.ptr, 0xff, big * es, s), "cudaMemsetAsync");  // unwritten elements show
  std::string why;
  if (kind == "reduce_scatter") {
    // in: world * count, the element index running over the whole buffer.
    upload(in.ptr, encode(t, values(g_rank, big)), s);
    void* dst = in_place ? static_cast<char*>(in.ptr) + g_rank * count * es : out.ptr;
    comm.reduce_scatter(in.ptr, dst, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want(count, 0.0f);
    for (size_t i = 0; i < count; ++i) want[i] = expected_sum(g_rank * count + i);
    why = compare(t, dst, want, "reduce_scatter");
  } else if (kind == "all_gather") {
    void* src = in_place ? static_cast<char*>(out.ptr) + g_rank * count * es : in.ptr;
    upload(src, encode(t, values(g_rank, count)), s);
    comm.all_gather(src, out.ptr, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count);
      want.insert(want.end(), v.begin(), v.end());
    }
    why = compare(t, out.ptr, want, "all_gather");
  } else if (kind == "broadcast") {
    upload(in.ptr, encode(t, values(g_rank == root ? root : 100 + g_rank, count)), s);
    comm.broadcast(in.ptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    why = compare(t, in.ptr, values(root, count), "broadcast");
  } else if (kind == "reduce") {
    upload(in.ptr, encode(t, values(g_rank, count)), s);
    void* dst = g_rank != root ? nullptr : in_place ? in.ptr : out.ptr;
    comm.reduce(in.ptr, dst, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = expected_sum(i);
    if (g_rank == root) why = compare(t, dst, want, "reduce at the root");
    // The input must be left as it was (a peer's kernel reads it; nobody writes it).
    if (why.empty() && !(in_place && g_rank == root)) why = compare(t, in.ptr, values(g_rank, count), "reduce's input");
  } else if (kind == "gather") {
    upload(in.ptr, encode(t, values(g_rank, count)), s);
    comm.gather(in.ptr, g_rank == root ? out.ptr : nullptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count);
      want.insert(want.end(), v.begin(), v.end());
    }
    if (g_rank == root) why = compare(t, out.ptr, want, "gather at the root");
  } else if (kind == "scatter") {
    // The root's input: world * count, the element index running over the whole buffer.
    upload(in.ptr, encode(t, values(g_rank == root ? root : 100 + g_rank, big)), s);
    comm.scatter(g_rank == root ? in.ptr : nullptr, out.ptr, count, t, root, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    why = compare(t, out.ptr, values(root, count, g_rank * count), "scatter");
  } else {  // all_to_all: block p of rank r's input is r * 1000 + p-th window of the values
    upload(in.ptr, encode(t, values(g_rank, big)), s);
    void* dst = in_place ? in.ptr : out.ptr;
    comm.all_to_all(in.ptr, dst, count, t, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::vector<float> want;
    for (int p = 0; p < g_world; ++p) {
      const std::vector<float> v = values(p, count, g_rank * count);
      want.insert(want.end(), v.begin(), v.end());
    }
    why = compare(t, dst, want, "all_to_all");
  }
  comm.deregister(in.ptr);
  comm.deregister(out.ptr);
  return why;
}

// Reduce-scatter then all-gather, again and again, with no host synchronization: a two-shot
// all-reduce built from two kinds of call, so the ordering between calls of different kinds is
// checked (every element of a world-sized buffer of ones is world^k after k rounds).
std::string chained_kinds_case(IpcComm& comm, cudaStream_t s) {
  const size_t count = 250007, n = static_cast<size_t>(g_world);
  DeviceBuffer a(count * n * 4), b(count * 4);
  upload(a.ptr, encode(DataType::float32, std::vector<float>(count * n, 1.0f)), s);
  int k = 0;
  double want = 1;
  while (want * g_world < double(1 << 24) && k < 12) {
    want *= g_world;
    ++k;
  }
  for (int i = 0; i < k; ++i) {
    comm.reduce_scatter(a.ptr, b.ptr, count, DataType::float32, s);
    comm.all_gather(b.ptr, a.ptr, count, DataType::float32, s);
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  std::string why = compare(DataType::float32, a.ptr, std::vector<float>(count * n, static_cast<float>(want)),
                            "after " + std::to_string(k) + " reduce-scatter + all-gather rounds");
  comm.deregister(a.ptr);
  comm.deregister(b.ptr);
  return why;
}

void collective_checks(IpcComm& comm, cudaStream_t s) {
  const std::string ranks = "/ranks" + std::to_string(g_world);
  for (const char* kind : {"reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "gather", "scatter"}) {
    const bool sums = std::strcmp(kind, "reduce_scatter") == 0 || std::strcmp(kind, "reduce") == 0;
    const bool rooted = std::strcmp(kind, "broadcast") == 0 || std::strcmp(kind, "reduce") == 0 ||
                        std::strcmp(kind, "gather") == 0 || std::strcmp(kind, "scatter") == 0;
    std::vector<DataType> types = {DataType::float32, DataType::bfloat16};
    if (!sums) types.push_back(DataType::int64);
    for (DataType t : types)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}})
        for (int root : rooted ? std::vector<int>{0, g_world - 1} : std::vector<int>{0}) {
          std::string name = std::string("IpcCollective.") + kind + "/" + type_name(t) + "/count" + std::to_string(count);
          if (rooted) name += "/root" + std::to_string(root);
          run_case(name + ranks, [&] { return collective_case(comm, kind, t, count, root, false, s); });
        }
  }
  run_case("IpcCollective.reduce_scatter/float32/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "reduce_scatter", DataType::float32, 100003, 0, true, s); });
  run_case("IpcCollective.all_gather/bfloat16/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "all_gather", DataType::bfloat16, 100003, 0, true, s); });
  run_case("IpcCollective.chained_reduce_scatter_all_gather" + ranks, [&] { return chained_kinds_case(comm, s); });
  // In place through the bounce buffer, and in place on some ranks only (the engine takes the
  // same path on every rank whatever each one's buffers: device_direct.cpp).
  run_case("IpcCollective.reduce/float32/count100003/in_place_at_root" + ranks,
           [&] { return collective_case(comm, "reduce", DataType::float32, 100003, g_world - 1, true, s); });
  run_case("IpcCollective.all_to_all/bfloat16/count100003/in_place" + ranks,
           [&] { return collective_case(comm, "all_to_all", DataType::bfloat16, 100003, 0, true, s); });
  run_case("IpcCollective.all_to_all/float32/count7/in_place_on_even_ranks" + ranks,
           [&] { return collective_case(comm, "all_to_all", DataType::float32, 7, 0, g_rank % 2 == 0, s); });
  run_case("IpcAllReduce.one-shot/float32/count100003/in_place" + ranks,
           [&] { return all_reduce_case(comm, Algo::kOneShot, DataType::float32, 100003, true, s); });
  run_case("IpcAllReduce.one-shot/bfloat16/count7/in_place_on_even_ranks" + ranks,
           [&] { return all_reduce_case(comm, Algo::kOneShot, DataType::bfloat16, 7, g_rank % 2 == 0, s); });
}

}  // namespace ipc_test
