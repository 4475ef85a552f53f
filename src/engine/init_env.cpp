// init_from_env: the torchrun / mpirun / srun path to a world group.
#include "common/log.hpp"
#include "kolo/process_group.hpp"

namespace kolo {

std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& opts) {
  LaunchEnv env = read_launch_env();
  TCPStore::Options so;
  so.host = env.master_addr;
  so.port = env.master_port;
  so.is_server = env.rank == 0;
  if (opts.timeout.count() > 0) so.timeout = opts.timeout;
  KOLO_LOG(debug, "init_from_env (" << env.source << "): rank " << env.rank << " of " << env.world_size << ", store "
                                    << env.master_addr << ":" << env.master_port);
  auto store = TCPStore::create(so);
  return ProcessGroup::create(store, env.rank, env.world_size, opts);
}

const char* version_string() { return "kolo 0.1.0"; }

}  // namespace kolo
