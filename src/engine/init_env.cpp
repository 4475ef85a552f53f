// init_from_env: the torchrun / mpirun / srun path to a world group.
#include <atomic>

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

// The secret init_from_env's store authenticates with (KOLO_STORE_AUTH), or "" for none.
// Authentication needs kolo at both ends: under torchrun's agent store the server is torch's,
// which speaks only c10d's protocol, so there it stays off (and "on" is a configuration error).
std::string store_secret_from_config(const LaunchEnv& env) {
  const std::string mode = config::get_string("KOLO_STORE_AUTH");
  if (mode != "auto" && mode != "on" && mode != "off") {
    throw InvalidArgument("KOLO_STORE_AUTH='" + mode + "' is not one of auto, on, off");
  }
  const std::string secret = config::get_string("KOLO_SECRET");
  // Each reason is said once per process: init_from_env may run again (a restarted group).
  static std::atomic<bool> said_off{false}, said_agent{false};
  if (mode == "off") {
    if (!secret.empty() && !said_off.exchange(true)) {
      KOLO_LOG(info, "KOLO_STORE_AUTH=off: the rendezvous store is not authenticated although KOLO_SECRET is set "
                     "(the transports' connections still are)");
    }
    return "";
  }
  if (env.agent_store) {
    if (mode == "on") {
      throw InvalidArgument("KOLO_STORE_AUTH=on, but the ranks join torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE), "
                            "which speaks only c10d's protocol and cannot authenticate: use KOLO_STORE_AUTH=auto or off");
    }
    if (!secret.empty() && !said_agent.exchange(true)) {
      KOLO_LOG(warn, "the rendezvous store is torchrun's agent store, whose c10d protocol has no authentication: "
                     "its keys are open to anyone who reaches MASTER_ADDR:MASTER_PORT although KOLO_SECRET is set "
                     "(the transports' connections are still authenticated)");
    }
    return "";
  }
  if (secret.empty() && mode == "on") {
    throw InvalidArgument("KOLO_STORE_AUTH=on needs a job secret: set KOLO_SECRET (kolorun sets one for every job)");
  }
  return secret;
}

}  // namespace

// The launch environment's store: the launcher's (KOLO_STORE_ADDR), torchrun's agent store, or
// (is_server for rank 0) the one rank 0 serves at MASTER_ADDR:MASTER_PORT.
// A joiner is not counted among the agent store's workers (its world size was reached long ago).
static std::shared_ptr<Store> store_from_env(const LaunchEnv& env, const GroupOptions& opts, bool joiner) {
  TCPStore::Options so;
  so.host = env.master_addr;
  so.port = env.master_port;
  so.is_server = env.rank == 0 && !env.agent_store;
  if (env.store_port != 0) {  // the launcher hosts it (KOLO_STORE_ADDR): no rank does
    so.host = env.store_host;
    so.port = env.store_port;
    so.is_server = false;
  }
  // In torchrun's agent store, count ourselves in c10d's "init/" as torch's own workers do.
  if (env.agent_store && !joiner) so.world_size = env.world_size;
  // The store's waits are bounded like everything else: by the group's timeout.
  so.timeout = opts.timeout.count() > 0 ? opts.timeout : default_group_timeout();
  so.protocol = store_protocol_from_config();
  so.secret = store_secret_from_config(env);
  KOLO_LOG(debug, "init_from_env (" << env.source << "): rank " << env.rank << " of " << env.world_size << ", store "
                                    << env.master_addr << ":" << env.master_port
                                    << (env.agent_store ? " (torchrun's agent store, prefix " + env.store_prefix + ")"
                                                        : std::string())
                                    << (so.secret.empty() ? ", unauthenticated" : ", authenticated"));
  std::shared_ptr<Store> store;
  try {
    store = TCPStore::create(so);
  } catch (const TimeoutError& e) {
    // Across hosts this is the usual first failure (the store's host is down, MASTER_ADDR is
    // wrong or does not resolve there): say which variables and which launcher it came from.
    if (env.store_port != 0)
      throw TimeoutError("rank " + std::to_string(env.rank) + " cannot reach the rendezvous store at KOLO_STORE_ADDR = " +
                         env.store_host + ":" + std::to_string(env.store_port) + " (the launcher, kolorun, serves it): " + e.what());
    throw TimeoutError("rank " + std::to_string(env.rank) + " cannot reach the rendezvous store at MASTER_ADDR:MASTER_PORT = " +
                       env.master_addr + ":" + std::to_string(env.master_port) + " (launch variables from " + env.source +
                       (so.is_server ? "" : env.agent_store ? "; torchrun's agent serves it" : "; rank 0 serves it") + "): " + e.what());
  }
  if (!env.store_prefix.empty()) store = make_prefix_store(env.store_prefix, store);
  return store;
}

std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& opts) {
  LaunchEnv env = read_launch_env();
  return ProcessGroup::create(store_from_env(env, opts, false), env.rank, env.world_size, opts);
}

std::shared_ptr<ProcessGroup> join_from_env(const GroupOptions& opts, const JoinOptions& join) {
  LaunchEnv env = read_launch_env();
  // A store served by rank 0 is no place to wait: rank 0 may be the rank being replaced, and a
  // joiner must not serve one itself.
  if (env.store_port == 0 && !env.agent_store)
    throw InvalidArgument("kolo: join_from_env needs a store that outlives every rank: KOLO_STORE_ADDR (kolorun hosts "
                          "it) or torchrun's agent store; this launch (" + env.source + ") has neither");
  return ProcessGroup::join(store_from_env(env, opts, true), opts, join);
}

const char* version_string() { return "kolo " KOLO_VERSION; }  // KOLO_VERSION: meson.build's project version

}  // namespace kolo
