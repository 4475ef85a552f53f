#include "engine/bootstrap.hpp"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>

#include "common/log.hpp"
#include "engine/host_identity.hpp"
#include "engine/listen_address.hpp"
#include "common/config.hpp"
#include "kolo/error.hpp"
#include "transports/setup_failure.hpp"

namespace kolo::engine {

Secret agree_secret(Store& store, const std::string& prefix, int rank, const std::string& explicit_secret) {
  std::string s = explicit_secret.empty() ? config::get_string("KOLO_SECRET") : explicit_secret;
  if (!s.empty()) return transport::auth::derive_secret(s);
  // No secret was given: rank 0 makes one and shares it through the store. Connections still
  // prove it by challenge-response, but anyone who can reach the store can read it there, so
  // the job is only as private as the store's port: say so once.
  const std::string key = prefix + "/secret";
  static std::atomic<bool> warned{false};
  if (rank == 0) {
    if (!warned.exchange(true))
      KOLO_LOG(warn, "no job secret (KOLO_SECRET unset): rank 0 made one and shared it through the store, which does "
                   "not authenticate its clients; the job is unauthenticated against anyone who can reach the store's "
                   "port (kolorun sets KOLO_SECRET for every launch)");
    const auto nonce = transport::auth::fresh_nonce();
    std::string made;
    static const char* hexd = "0123456789abcdef";
    for (uint8_t c : nonce) {
      made += hexd[c >> 4];
      made += hexd[c & 15];
    }
    store.set(key, made);
    return transport::auth::derive_secret(made);
  }
  return transport::auth::derive_secret(store.get_string(key));
}

// A rank whose setup failed because another rank's did first (it found a segment gone, a socket
// closed) reports that rank's reason, which is the one the user can act on, and keeps its own
// symptom in parentheses.
[[noreturn]] static void rethrow_with_first_cause(const transport::Bootstrap& b, const std::exception& e) {
  const std::exception_ptr original = std::current_exception();
  std::optional<std::string> first;
  try {
    first = transport::peer_setup_failure(b);
  } catch (const std::exception&) {
    // The store is gone too: our own error is all there is to say.
  }
  transport::acknowledge_setup_failure(b, std::chrono::milliseconds(2000));
  const std::string own = e.what();
  if (!first || own.find(*first) != std::string::npos) std::rethrow_exception(original);
  int culprit = -1;
  if (first->rfind("rank ", 0) == 0) culprit = std::atoi(first->c_str() + 5);
  throw PeerError("rank " + std::to_string(b.rank) + " could not connect to its peers because " + *first + " (here: " + own + ")",
                  culprit);
}

Connected connect_group(Store& store, const std::string& prefix, int rank, int size, const Secret& secret,
                        std::chrono::steady_clock::time_point deadline, const std::string& forced_transport) {
  Connected out;
  out.ctx = std::make_unique<Context>(rank, size);
  // Who shares a host with whom.
  std::string me = host_identity();
  store.set(prefix + "/host/" + std::to_string(rank), me);
  out.host_ids.resize(static_cast<size_t>(size));
  bool one_host = true;
  for (int r = 0; r < size; ++r) {
    out.host_ids[static_cast<size_t>(r)] = r == rank ? me : store.get_string(prefix + "/host/" + std::to_string(r));
    one_host &= out.host_ids[static_cast<size_t>(r)] == me;
  }
  transport::Bootstrap b;
  b.store = &store;
  b.prefix = prefix;
  b.rank = rank;
  b.size = size;
  b.secret = secret;
  b.deadline = deadline;
  b.host_ids = out.host_ids;
  b.failures = out.ctx.get();
  b.listen_addr = listen_address(one_host);
  const std::string mode = config::get_string("KOLO_CONNECT");
  if (mode != "eager" && mode != "lazy") throw InvalidArgument("KOLO_CONNECT='" + mode + "': expected eager or lazy");
  b.connect_lazily = mode == "lazy";

  // Pick a transport per peer: the forced one, else the highest-priority one that reaches it.
  const auto& transports = transport::all_transports();
  const transport::TransportInfo* forced = nullptr;
  if (!forced_transport.empty()) {
    forced = transport::find_transport(forced_transport);
    if (!forced) {
      std::string names;
      for (const auto& t : transports) names += std::string(names.empty() ? "" : ", ") + t.name;
      throw InvalidArgument("KOLO_TRANSPORT='" + forced_transport + "' is not a transport of this build (have: " + names + ")");
    }
  }
  std::map<const transport::TransportInfo*, std::vector<int>> by_transport;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const transport::TransportInfo* best = nullptr;
    if (forced) {
      if (!forced->reaches(b, p))
        throw InvalidArgument(std::string("transport ") + forced->name + " cannot reach rank " + std::to_string(p));
      best = forced;
    } else {
      for (const auto& t : transports)
        if (t.reaches(b, p) && (!best || t.priority > best->priority)) best = &t;
    }
    if (!best) throw Error("no transport reaches rank " + std::to_string(p));
    by_transport[best].push_back(p);
  }
  // Connect transport by transport in registry order, which every rank shares, so that no two
  // ranks wait on each other inside different transports.
  for (const auto& t : transports) {
    auto it = by_transport.find(&t);
    if (it == by_transport.end()) continue;
    std::unique_ptr<transport::Device> dev;
    try {
      dev = t.connect(b, it->second);
    } catch (const std::exception& e) {
      rethrow_with_first_cause(b, e);
    }
    out.ctx->add_device(std::move(dev), it->second);
    KOLO_LOG(debug, "group " << prefix << ": " << t.name << " carries " << it->second.size() << " peer(s)");
  }
  return out;
}

}  // namespace kolo::engine
