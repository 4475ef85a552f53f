// kolorun hosts the job's rendezvous store for a job on this host, in its own process, so that
// the store outlives every rank: after rank 0 dies the survivors still agree on who is left
// (ProcessGroup::shrink). The ranks find it in KOLO_STORE_ADDR and all join it as clients;
// MASTER_ADDR:MASTER_PORT stays free for the program (a torch store, say). With --hosts the
// ranks' hosts may not reach kolorun's, so rank 0 hosts the store there, as before.
#pragma once
#include <memory>
#include <string>

#include "kolo/store.hpp"
#include "kolorun/options.hpp"

namespace kolo::launcher {

// The secret the ranks' store clients will prove (init_from_env's rule, KOLO_STORE_AUTH from -x
// or kolorun's environment): off → none; otherwise the job's.
std::string store_secret(const LaunchOptions& options, const std::string& job_secret);

struct HostedStore {
  std::unique_ptr<TCPStoreServer> server;
  std::string address;  // "host:port", KOLO_STORE_ADDR's value
};

// Starts the server on `host` at a free port. Throws kolo::Error naming the address.
HostedStore host_store(const std::string& host, const std::string& secret);

}  // namespace kolo::launcher
