// Forming a group: the job secret, which ranks share a host, the address to listen on, and
// connecting every peer through the transport that should carry its messages.
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>

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
};

// Collective over the group's ranks. `forced_transport` empty: automatic per peer.
Connected connect_group(Store& store, const std::string& prefix, int rank, int size, const Secret& secret,
                        std::chrono::steady_clock::time_point deadline, const std::string& forced_transport);

}  // namespace kolo::engine
