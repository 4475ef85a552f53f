// The cuda_ipc pair device over real CUDA memory, as a TransportInfo (ipc_pair_device.hpp):
// apart from ipc_pair_device.cpp because only builds with CUDA have cuda_memory().
#include "transports/cuda_ipc/cuda_memory.hpp"
#include "transports/cuda_ipc/ipc_pair_device.hpp"

namespace kolo::cuda_ipc {
namespace {
std::unique_ptr<transport::Device> connect_cuda(const transport::Bootstrap& b, const std::vector<int>& peers) {
  return IpcPairDevice::connect(cuda_memory(), b, peers);
}
}  // namespace

const transport::TransportInfo& cuda_pair_transport() {
  static const transport::TransportInfo info{"cuda_ipc", 0, &IpcPairDevice::reaches, &connect_cuda};
  return info;
}

}  // namespace kolo::cuda_ipc
