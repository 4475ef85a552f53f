// init_from_env: the torchrun / mpirun / srun path to a world group.
#include "common/log.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "kolo/process_group.hpp"
#include "kolo/store.hpp"

namespace kolo {

std::chrono::milliseconds default_group_timeout();  // process_group.cpp

namespace {

TCPStore::Protocol store_protocol_from_config() {
  const std::string p = config::get_string("KOLO_STORE_PROTOCOL");
  if (p == "auto") return TCPStore::Protocol::kAuto;
  if (p == "torch1") return TCPStore::Protocol::kLegacy;
  if (p == "torch2") return TCPStore::Protocol::kValidated;
  throw InvalidArgument("KOLO_STORE_PROTOCOL='" + p + "' is not one of auto, torch1, torch2");
}

}  // namespace

std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& opts) {
  LaunchEnv env = read_launch_env();
  TCPStore::Options so;
  so.host = env.master_addr;
  so.port = env.master_port;
  so.is_server = env.rank == 0 && !env.agent_store;
  // In torchrun's agent store, count ourselves in c10d's "init/" as torch's own workers do.
  if (env.agent_store) so.world_size = env.world_size;
  // The store's waits are bounded like everything else: by the group's timeout.
  so.timeout = opts.timeout.count() > 0 ? opts.timeout : default_group_timeout();
  so.protocol = store_protocol_from_config();
  KOLO_LOG(debug, "init_from_env (" << env.source << "): rank " << env.rank << " of " << env.world_size << ", store "
                                    << env.master_addr << ":" << env.master_port
                                    << (env.agent_store ? " (torchrun's agent store, prefix " + env.store_prefix + ")"
                                                        : std::string()));
  std::shared_ptr<Store> store;
  try {
    store = TCPStore::create(so);
  } catch (const TimeoutError& e) {
    // Across hosts this is the usual first failure (the store's host is down, MASTER_ADDR is
    // wrong or does not resolve there): say which variables and which launcher it came from.
    throw TimeoutError("rank " + std::to_string(env.rank) + " cannot reach the rendezvous store at MASTER_ADDR:MASTER_PORT = " +
                       env.master_addr + ":" + std::to_string(env.master_port) + " (launch variables from " + env.source +
                       (so.is_server ? "" : env.agent_store ? "; torchrun's agent serves it" : "; rank 0 serves it") + "): " + e.what());
  }
  if (!env.store_prefix.empty()) store = make_prefix_store(env.store_prefix, store);
  return ProcessGroup::create(store, env.rank, env.world_size, opts);
}

const char* version_string() { return "kolo " KOLO_VERSION; }  // KOLO_VERSION: meson.build's project version

}  // namespace kolo
