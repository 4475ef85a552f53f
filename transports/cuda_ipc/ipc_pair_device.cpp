// IpcPairDevice: setup, progress, abort and the orderly close (see ipc_pair_device.hpp).
//
// Setup: listen on an abstract unix socket and publish its name with a fresh nonce in the
// store; connect to every higher rank with a hello that proves the job secret (challenge-
// response over the acceptor's published nonce, transports/common/auth.hpp), accept every lower
// rank checking its hello, check the acceptors' answers; then allocate and export one staging
// ring per peer. A rank whose setup fails records why in the store (setup_failure.hpp), so the
// others report that instead of waiting out the timeout.
#include "transports/cuda_ipc/ipc_pair_device.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "common/log.hpp"
#include "kolo/error.hpp"
#include "kolo/store.hpp"
#include "transports/common/auth.hpp"
#include "transports/common/seqpacket.hpp"
#include "transports/seqpacket_handshake.hpp"
#include "transports/common/setup_text.hpp"
#include "transports/cuda_ipc/standin_memory.hpp"
#include "transports/setup_failure.hpp"

namespace kolo::cuda_ipc {

using transport::Bootstrap;
using transport::Fd;
using transport::HelloStatus;
namespace sp = transport::seqpacket;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kWho = "cuda_ipc";
constexpr sp::HandshakeNames kNames{kWho, kWho, "cuda_ipc", "cuda_ipc", wire::kProtocolVersion, wire::kHelloMagic};

std::string store_key(const Bootstrap& b, int rank) { return b.prefix + "/cuda_ipc_pair/" + std::to_string(rank); }

std::string socket_name(const Bootstrap& b, int attempt) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "kolo-cuda-ipc-%012llx-r%d-%d-%d",
                static_cast<unsigned long long>(transport::group_hash(b.prefix) & 0xffffffffffffull), b.rank,
                static_cast<int>(::getpid()), attempt);
  return buf;
}

}  // namespace

IpcPairDevice::IpcPairDevice(IpcMemory& memory, const Bootstrap& b)
    : memory_(memory), sink_(b.failures), pairs_(static_cast<size_t>(b.size)) {
  const std::string prefix = b.prefix + "/cuda_ipc_pair";
  // A retired registration (a buffer freed and reallocated, or deregistered) is announced on
  // every pair, after the messages that named it.
  cache_ = std::make_unique<RegistrationCache>(*b.store, prefix, b.rank, memory_, [this](uint64_t gen) {
    for (IpcPair* p : list_) p->send_retire(gen);
  });
  mappings_ = std::make_unique<PeerMappings>(*b.store, prefix, memory_);
}

IpcPairDevice::~IpcPairDevice() {
  // The pairs first: their copies (which read and write the rings) end with their queues.
  list_.clear();
  pairs_.clear();
  try {
    mappings_->close_all();
  } catch (...) {
    // At exit the driver reclaims mappings with the context anyway.
  }
  for (void* r : rings_) {
    try {
      memory_.release(r);
    } catch (...) {
    }
  }
}

bool IpcPairDevice::reaches(const Bootstrap& b, int peer) {
  if (peer < 0 || b.rank < 0) return false;
  size_t p = static_cast<size_t>(peer), me = static_cast<size_t>(b.rank);
  return p < b.host_ids.size() && me < b.host_ids.size() && !b.host_ids[me].empty() && b.host_ids[p] == b.host_ids[me];
}

std::unique_ptr<IpcPairDevice> IpcPairDevice::connect(IpcMemory& memory, const Bootstrap& b, const std::vector<int>& peers) {
  std::unique_ptr<IpcPairDevice> dev(new IpcPairDevice(memory, b));
  try {
    dev->connect_or_throw(b, peers);
    return dev;
  } catch (const std::exception& e) {
    transport::publish_setup_failure(b, e.what());
    throw;
  }
}

void IpcPairDevice::connect_or_throw(const Bootstrap& b, const std::vector<int>& peers) {
  // 1. Listen and publish, with this setup's nonce, which every connector's proof must cover.
  Fd listener;
  std::string name;
  for (int attempt = 0; attempt < 16 && !listener.valid(); ++attempt) {
    name = socket_name(b, attempt);
    listener = sp::listen_abstract(kWho, name);
  }
  if (!listener.valid()) throw Error("cuda_ipc: no free socket name starting with " + socket_name(b, 0));
  const transport::auth::Nonce my_nonce = transport::auth::fresh_nonce();
  b.store->set(store_key(b, b.rank), name + "\n" + transport::auth::to_hex(my_nonce));

  // 2. The higher ranks' listening names and nonces, as they published them.
  std::vector<std::string> address(static_cast<size_t>(b.size));
  std::vector<transport::auth::Nonce> peer_nonce(static_cast<size_t>(b.size));
  for (int peer : peers) {
    if (peer < b.rank) continue;
    const std::string info = b.store->get_string(store_key(b, peer));
    const auto nl = info.find('\n');
    if (nl == std::string::npos || !transport::auth::from_hex(info.substr(nl + 1), &peer_nonce[static_cast<size_t>(peer)]))
      throw Error("cuda_ipc: malformed store entry " + store_key(b, peer) + " (mixed kolo versions?)");
    address[static_cast<size_t>(peer)] = info.substr(0, nl);
  }

  // 3-4. Connect to the higher ranks, accept the lower ones, each hello and answer authenticated
  //      (transports/seqpacket_handshake.hpp).
  const sp::Handshake<wire::Hello> handshake(b, kNames, my_nonce);
  std::vector<Fd> socks = handshake.run(peers, listener.get(), address, peer_nonce).socks;

  // 5. One staging ring per peer, exported now (the peer maps it at its first small message).
  for (int peer : peers) {
    void* ring = memory_.allocate(kRingBytes);
    rings_.push_back(ring);
    const RegistrationCache::Found f = cache_->lookup(ring, kRingBytes);
    if (f.gen == 0 || f.offset != 0) throw Error("cuda_ipc: the staging ring for rank " + std::to_string(peer) + " cannot be exported");
    PairShared shared{memory_, *cache_, *mappings_, kEagerMaxBytes};
    pairs_[static_cast<size_t>(peer)] = std::make_unique<IpcPair>(peer, sink_, shared, std::move(socks[static_cast<size_t>(peer)]),
                                                                  static_cast<char*>(ring), kRingBytes, f.gen);
    list_.push_back(pairs_[static_cast<size_t>(peer)].get());
  }
  KOLO_LOG(debug, "cuda_ipc: pair device over " << memory_.name() << " connected to " << peers.size() << " peer(s)");
}

transport::Pair* IpcPairDevice::pair(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= pairs_.size()) return nullptr;
  return pairs_[static_cast<size_t>(peer)].get();
}

bool IpcPairDevice::poll() {
  bool moved = false;
  for (IpcPair* p : list_) moved |= p->progress();
  return moved;
}

void IpcPairDevice::abort(const std::string& reason) {
  for (IpcPair* p : list_) p->abort(reason);
}

std::vector<int> IpcPairDevice::close(std::chrono::steady_clock::time_point deadline) {
  for (IpcPair* p : list_) p->set_closing();
  std::vector<int> missing;
  for (;;) {
    const bool moved = poll();
    missing.clear();
    for (IpcPair* p : list_) {
      if (p->done()) continue;
      p->try_send_bye();
      if (!p->closed_cleanly()) missing.push_back(p->peer());
    }
    if (missing.empty() || Clock::now() >= deadline) break;
    if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (IpcPair* p : list_) p->shutdown_socket();
  return missing;
}

namespace {
std::unique_ptr<transport::Device> connect_standin(const Bootstrap& b, const std::vector<int>& peers) {
  return IpcPairDevice::connect(standin_memory(), b, peers);
}
}  // namespace

const transport::TransportInfo& standin_pair_transport() {
  static const transport::TransportInfo info{"cuda_ipc/standin", 0, &IpcPairDevice::reaches, &connect_standin};
  return info;
}

}  // namespace kolo::cuda_ipc
