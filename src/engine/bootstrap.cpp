#include "engine/bootstrap.hpp"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <algorithm>
#include <optional>

#include "common/log.hpp"
#include "engine/host_identity.hpp"
#include "engine/listen_address.hpp"
#include "engine/shrink.hpp"
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

// The peers (ranks of the new group) whose connections of `reuse->old` this rank can carry
// over: a device's reusable_peers(), asked after the old group aborted. One device per
// transport at most (the one that carries the lowest peer): a group re-formed before may hold
// two of a transport (one handed over, one connected anew), and two hand-overs of a transport
// in turn could wait on each other across ranks (A's first on B, B's first on C, C's first on
// A); every rank handing over at most one device per transport, in registry order, sends all
// its markers of a step before it waits for any. The other device's peers connect anew.
static std::vector<int> reusable_peers(const Reuse& reuse, int rank, int size) {
  std::map<std::string, std::pair<transport::Device*, std::vector<int>>> by_transport;
  std::vector<int> out;
  for (int p = 0; p < size; ++p) {
    const int old = p == rank ? -1 : reuse.old_peer[static_cast<size_t>(p)];
    transport::Device* d = old >= 0 ? reuse.old->device_of(old) : nullptr;
    if (d == nullptr) continue;
    auto it = by_transport.find(d->name());
    if (it == by_transport.end()) it = by_transport.emplace(d->name(), std::make_pair(d, d->reusable_peers())).first;
    const auto& [chosen, peers] = it->second;
    if (chosen == d && std::find(peers.begin(), peers.end(), old) != peers.end()) out.push_back(p);
  }
  return out;
}

static std::string reuse_name(const Reuse* reuse) { return reuse ? reuse->old_prefix : std::string("(none)"); }

Connected connect_group(Store& store, const std::string& prefix, int rank, int size, const Secret& secret,
                        std::chrono::steady_clock::time_point deadline, const std::string& forced_transport,
                        const Reuse* reuse) {
  Connected out;
  out.ctx = std::make_unique<Context>(rank, size);
  // The connections this rank offers to carry over, named by the group they served: written
  // before its host identity, so a peer that has read the identity finds the offer, and by a
  // rank whose old group has aborted (its pairs carry nothing of that group any more but what
  // the hand-over's resynchronisation drops). A connection is kept only if both ends offer it.
  std::vector<int> offered;
  if (reuse) {
    if (reuse->old) offered = reusable_peers(*reuse, rank, size);  // none: this rank connects anew
    store.set(prefix + "/reuse/" + std::to_string(rank), reuse->old_prefix + "\n" + encode_ranks(offered));
  }
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

  std::vector<bool> carried(static_cast<size_t>(size), false);
  for (int p : offered) {
    const std::string offer = store.get_string(prefix + "/reuse/" + std::to_string(p));
    const auto nl = offer.find('\n');
    if (nl == std::string::npos || offer.compare(0, nl, reuse->old_prefix) != 0) continue;
    const auto theirs = decode_ranks(offer.substr(nl + 1));
    carried[static_cast<size_t>(p)] = theirs && std::find(theirs->begin(), theirs->end(), rank) != theirs->end();
  }
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
  // Within a transport, the connections carried over first (every rank that keeps one sends
  // its marker before it waits for its peer's), then the new ones.
  for (const auto& t : transports) {
    auto it = by_transport.find(&t);
    if (it == by_transport.end()) continue;
    std::vector<int> fresh;
    std::map<transport::Device*, transport::Device::Handover> handovers;
    for (int p : it->second) {
      const int old = carried[static_cast<size_t>(p)] ? reuse->old_peer[static_cast<size_t>(p)] : -1;
      transport::Device* d = old >= 0 ? reuse->old->device_of(old) : nullptr;
      // Both ends chose this transport for each other, in the old group and now: the same
      // rule on the same inputs.
      if (d == nullptr || std::string(d->name()) != t.name) {
        fresh.push_back(p);
        continue;
      }
      transport::Device::Handover& h = handovers[d];
      h.boot = b;
      h.keep.emplace_back(old, p);
    }
    for (auto& [old_dev, h] : handovers) {
      std::unique_ptr<transport::Device> dev;
      try {
        dev = old_dev->hand_over(h);
        if (!dev) throw Error(std::string("transport ") + t.name + " offered connections it cannot hand over");
      } catch (const std::exception& e) {
        // Peers waiting for this rank's new connections give up at once, with this reason.
        transport::publish_setup_failure(b, e.what());
        throw;
      }
      std::vector<int> kept;
      for (const auto& k : h.keep) {
        kept.push_back(k.second);
        reuse->old->forget_pair(k.first);  // the old device no longer owns it
      }
      out.ctx->add_device(std::move(dev), kept);
      out.carried += static_cast<int>(kept.size());
    }
    if (fresh.empty()) continue;
    std::unique_ptr<transport::Device> dev;
    try {
      dev = t.connect(b, fresh);
    } catch (const std::exception& e) {
      rethrow_with_first_cause(b, e);
    }
    out.ctx->add_device(std::move(dev), fresh);
    KOLO_LOG(debug, "group " << prefix << ": " << t.name << " carries " << it->second.size() << " peer(s), "
                             << it->second.size() - fresh.size() << " of them over connections kept from " << reuse_name(reuse));
  }
  return out;
}

}  // namespace kolo::engine
