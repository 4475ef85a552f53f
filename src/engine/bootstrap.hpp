// Forming a group: the job secret, which ranks share a host, the address to listen on, and
// connecting every peer through the transport that should carry its messages.
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/context.hpp"
#include "kolo/store.hpp"
#include "transports/common/auth.hpp"

namespace kolo::engine {

using Secret = transport::auth::Secret;

// opts.secret, else KOLO_SECRET, else one made by rank 0 and shared through the store.
Secret agree_secret(Store& store, const std::string& prefix, int rank, const std::string& explicit_secret);

struct Connected {
  std::unique_ptr<Context> ctx;
  std::vector<std::string> host_ids;
  int carried = 0;  // connections kept from the group it replaces (Reuse)
};

// What a re-formed group (ProcessGroup::shrink) may carry over from the group it replaces: the
// connections of that group's Context, which has aborted, and which nothing else touches while
// the new group connects (the caller holds the old executor's run lock).
struct Reuse {
  Context* old = nullptr;     // null: offers nothing (connects anew, but says so to the peers)
  std::string old_prefix;     // names those connections: both ends must offer the same group's
  std::vector<int> old_peer;  // per rank of the new group: its peer number in `old`, -1 if none
};

// Collective over the group's ranks. `forced_transport` empty: automatic per peer. With `reuse`,
// a peer whose connection both ends offer (the store says which) keeps it, handed over by its
// device (transport::Device::hand_over, after a resynchronisation); the others connect anew.
Connected connect_group(Store& store, const std::string& prefix, int rank, int size, const Secret& secret,
                        std::chrono::steady_clock::time_point deadline, const std::string& forced_transport,
                        const Reuse* reuse = nullptr);

}  // namespace kolo::engine
