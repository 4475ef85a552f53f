// Which RDMA device, port and GID this process uses: KOLO_IB_HCA (name[:port]) and
// KOLO_IB_GID_INDEX, else the first ACTIVE port and, on RoCE, a RoCE v2 GID that maps an IPv4
// address (the one routable over UDP/IP between hosts).
#pragma once
#include <string>

#include "transports/ibverbs/ib_verbs.hpp"

namespace kolo::ib {

struct PortChoice {
  std::string device;  // e.g. "mlx5_0", "rxe0"
  uint8_t port = 1;
  bool roce = false;   // Ethernet link layer: addressed by GID; InfiniBand: by LID
  int gid_index = -1;  // -1: none (InfiniBand without KOLO_IB_GID_INDEX)
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  std::string describe() const;  // "rxe0 port 1, RoCE, GID index 1 (::ffff:10.0.0.1), MTU 1024"
};

struct OpenPort {
  ContextPtr ctx;
  PortChoice choice;
};

// Opens the chosen device; throws kolo::Error saying what was looked at and why none fits.
OpenPort open_port();

// Whether this process has a usable port, answered once per process ("" if it has one, else
// why not). Never throws.
const std::string& port_problem();

// GPUDirect RDMA (nvidia_peermem / nv_peer_mem) loaded? kolo has no device buffers yet, so this
// is only logged; see docs/RDMA.md.
bool gpudirect_module_loaded();

}  // namespace kolo::ib
