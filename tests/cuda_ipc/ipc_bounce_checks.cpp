// kolo-ipc-test, the bounce buffers: every collective on memory CUDA IPC cannot export.
#include "ipc_test_support.hpp"

namespace ipc_test {

// Every collective on memory that cannot be exported (managed, pool): the bounce path, with
// the choice of algorithm and the results the same as on cudaMalloc memory.
void unexportable_memory_checks(IpcComm& comm, cudaStream_t s) {
  const std::string ranks = "/ranks" + std::to_string(g_world);
  for (Mem mem : {Mem::managed, Mem::pool}) {
    g_mem = mem;
    const std::string m = std::string("/") + mem_name(mem);
    for (Algo algo : kolo::cuda_ipc::kAllAlgos) {
      run_case(std::string("IpcBounce.all_reduce/") + kolo::cuda_ipc::algo_name(algo) + m + ranks,
               [&] { return all_reduce_case(comm, algo, DataType::float32, 100003, false, s); });
      if (algo != Algo::kOneShot)
        run_case(std::string("IpcBounce.all_reduce/") + kolo::cuda_ipc::algo_name(algo) + "/in_place" + m + ranks,
                 [&] { return all_reduce_case(comm, algo, DataType::bfloat16, 100003, true, s); });
    }
    for (const char* kind : {"reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "gather", "scatter"})
      run_case(std::string("IpcBounce.") + kind + m + ranks,
               [&] { return collective_case(comm, kind, DataType::float32, 100003, g_world - 1, false, s); });
    run_case("IpcBounce.chained/two-shot-push" + m + ranks, [&] { return chained_case(comm, Algo::kTwoShotPush, s); });
  }
  g_mem = Mem::device;
}

}  // namespace ipc_test
