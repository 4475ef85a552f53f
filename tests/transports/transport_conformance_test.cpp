// The transport conformance suite: every registered transport (KOLO_REGISTER_TRANSPORT) must
// pass it, with threads as ranks sharing an in-process store. This file says which transports
// run it (the one instantiation); the cases are in the files by topic, on the fixture in
// conformance_fixture.hpp:
//   transport_conformance_data_test.cpp      bytes intact at every size, matching in posting
//                                            order, four ranks exchanging at once
//   transport_conformance_peek_test.cpp      peek_incoming shows the next header, consuming nothing
//   transport_conformance_failure_test.cpp   tag and size mismatches, dead peers, abort notices,
//                                            orderly goodbyes, a pair's first failure only,
//                                            a wrong secret refused
//   transport_conformance_handover_test.cpp  the shrink's hand-over of surviving connections
// (The transport-specific paths stay in tests/shm and tests/ibverbs: ring wraps, cross-memory
// attach, sleeping and doorbells, slot boundaries, port selection.) A transport that does not
// reach a peer on this machine (ibverbs without an RDMA port) is skipped, saying so. A new
// transport is one folder (registering itself), its name in kolo_transports (meson.build), and
// this suite passing.
// tcp runs it four times: connecting eagerly (a full mesh at setup) and lazily (KOLO_CONNECT=lazy:
// each pair on its first use), each in clear and with KOLO_TLS=1; the lazy mode has its own cases
// in tcp_on_demand_test.cpp (what it connects, both sides dialling at once, a peer dead before the
// first connect).
// The cuda_ipc pair device (transports/cuda_ipc/ipc_pair_device.hpp: device memory between the
// processes of one node, not in the registry) runs every case on device buffers (Buf in the
// fixture): "cuda_ipc/standin" over the host stand-in of device memory, everywhere; "cuda_ipc"
// over cudaMalloc'd memory with a GPU (built with CUDA; skips, saying why, without one). Its
// cross-process run is kolo-ipc-test's pair part (tests/cuda_ipc).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "transports/transport.hpp"
#include "conformance_fixture.hpp"

namespace kolo::conformance {
namespace {

std::vector<std::string> registered_transports() {
  std::vector<std::string> names;
  for (const auto& t : transport::all_transports()) names.push_back(t.name);
  names.push_back("tcp/lazy");  // the only transport whose connections can wait for their first use
  names.push_back("tcp/tls");   // KOLO_TLS=1: TLS handshake at setup, records on the data path
  names.push_back("tcp/lazy/tls");  // ... and the TLS handshake in the pair's first reads and writes
  names.push_back("cuda_ipc/standin");  // device memory between processes of a node, on the host stand-in
#ifdef KOLO_TEST_CUDA_IPC
  names.push_back("cuda_ipc");  // ... on the GPU
#endif
  return names;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(AllTransports, TransportConformance, ::testing::ValuesIn(registered_transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

}  // namespace kolo::conformance
