// The environment every rank starts with: kolorun's own environment, the -x additions, and the
// rendezvous variables (torchrun-compatible names plus kolo's own).
#pragma once
#include <string>
#include <vector>

#include "kolorun/options.hpp"

namespace kolo::launcher {

// Values shared by all ranks of one launch.
struct JobIdentity {
  std::string job_id;  // random hex, so shared-memory names of concurrent jobs never collide
  std::string secret;  // 128-bit hex; ranks use it to refuse connections from other jobs
  std::string master_addr;
  int master_port = 0;
  std::string store_addr;  // KOLO_STORE_ADDR: the store kolorun hosts (store_host.hpp); empty: none
};

// Hex text of `bytes` random bytes from the kernel's generator. Throws kolo::Error.
std::string random_hex(size_t bytes);

// Binds port 0 on 127.0.0.1, reads the port the kernel chose and closes the socket. Another
// process could take it before rank 0 binds it; that race is the price of not keeping a
// socket open across exec, and the ephemeral range makes it unlikely. Throws kolo::Error.
int pick_free_port();

// KOLO_SECRET is kept from -x or from kolorun's environment so that separately launched jobs
// can be told to trust each other; otherwise it is fresh per launch.
JobIdentity make_job_identity(const LaunchOptions& options);

// The variables kolorun sets for one rank, -x ones first, as "NAME=VALUE": what a launch agent
// must carry to another host.
std::vector<std::string> launch_variables(const LaunchOptions& options, const JobIdentity& identity, int rank);

// "NAME=VALUE" entries for one rank. base is kolorun's environment in the same form; later
// sources replace earlier entries of the same name: base, then -x, then kolorun's variables.
std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const LaunchOptions& options,
                                          const JobIdentity& identity, int rank);

// kolorun's own environment as "NAME=VALUE" entries.
std::vector<std::string> current_environment();

}  // namespace kolo::launcher
