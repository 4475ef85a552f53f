// init_from_env: the torchrun / mpirun / srun path to a world group.
#include "common/log.hpp"
#include "engine/config.hpp"
#include "kolo/process_group.hpp"

namespace kolo {

std::chrono::milliseconds default_group_timeout();  // process_group.cpp

std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& opts) {
  LaunchEnv env = read_launch_env();
  TCPStore::Options so;
  so.host = env.master_addr;
  so.port = env.master_port;
  so.is_server = env.rank == 0;
  // The store's waits are bounded like everything else: by the group's timeout.
  so.timeout = opts.timeout.count() > 0 ? opts.timeout : default_group_timeout();
  KOLO_LOG(debug, "init_from_env (" << env.source << "): rank " << env.rank << " of " << env.world_size << ", store "
                                    << env.master_addr << ":" << env.master_port);
  auto store = TCPStore::create(so);
  return ProcessGroup::create(store, env.rank, env.world_size, opts);
}

const char* version_string() { return "kolo 0.1.0"; }

}  // namespace kolo
