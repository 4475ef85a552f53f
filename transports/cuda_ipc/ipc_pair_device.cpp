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

std::string store_key(const Bootstrap& b, int rank) { return b.prefix + "/cuda_ipc_pair/" + std::to_string(rank); }

transport::auth::Binding binding(const Bootstrap& b, int connector, int acceptor) {
  return {"cuda_ipc", wire::kProtocolVersion, transport::group_hash(b.prefix), connector, acceptor, b.size};
}

transport::auth::Mac mac_of(const wire::Hello& h) {
  transport::auth::Mac m{};
  std::memcpy(m.data(), h.mac, m.size());
  return m;
}

transport::auth::Nonce nonce_of(const wire::Hello& h) {
  transport::auth::Nonce n{};
  std::memcpy(n.data(), h.nonce, n.size());
  return n;
}

wire::Hello make_hello(const Bootstrap& b, int peer, HelloStatus status) {
  wire::Hello h{};
  h.magic = wire::kHelloMagic;
  h.protocol_version = wire::kProtocolVersion;
  h.group_hash = transport::group_hash(b.prefix);
  h.src_rank = b.rank;
  h.dst_rank = peer;
  h.world_size = b.size;
  h.status = static_cast<uint32_t>(status);
  return h;
}

HelloStatus check_hello(const wire::Hello& h, size_t got, const Bootstrap& b, const std::vector<bool>& want,
                        const transport::auth::Nonce& mine) {
  using namespace transport::auth;
  if (got != sizeof h || h.magic != wire::kHelloMagic) return HelloStatus::bad_magic;
  if (h.protocol_version != wire::kProtocolVersion) return HelloStatus::bad_version;
  if (h.group_hash != transport::group_hash(b.prefix) || h.world_size != b.size || h.dst_rank != b.rank) return HelloStatus::bad_group;
  if (h.src_rank < 0 || h.src_rank >= b.size || !want[static_cast<size_t>(h.src_rank)]) return HelloStatus::bad_rank;
  if (!same(mac_of(h), prove(b.secret, Role::connector, binding(b, h.src_rank, b.rank), nonce_of(h), mine)))
    return HelloStatus::bad_secret;
  return HelloStatus::ok;
}

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

  // 2. Connect to the higher ranks (the kernel queues a connection: nobody waits to be accepted).
  std::vector<Fd> socks(static_cast<size_t>(b.size));
  std::vector<transport::auth::Nonce> challenges(static_cast<size_t>(b.size)), peer_nonce(static_cast<size_t>(b.size));
  std::vector<bool> want(static_cast<size_t>(b.size), false);
  std::vector<int> higher;
  int lower = 0;
  for (int peer : peers) {
    if (peer < b.rank) {
      want[static_cast<size_t>(peer)] = true;
      ++lower;
      continue;
    }
    const std::string info = b.store->get_string(store_key(b, peer));
    const auto nl = info.find('\n');
    if (nl == std::string::npos || !transport::auth::from_hex(info.substr(nl + 1), &peer_nonce[static_cast<size_t>(peer)]))
      throw Error("cuda_ipc: malformed store entry " + store_key(b, peer) + " (mixed kolo versions?)");
    Fd fd = sp::connect_abstract_until(kWho, info.substr(0, nl), b.deadline);
    wire::Hello h = make_hello(b, peer, HelloStatus::ok);
    const transport::auth::Nonce challenge = transport::auth::fresh_nonce();
    std::memcpy(h.nonce, challenge.data(), sizeof h.nonce);
    const auto proof = transport::auth::prove(b.secret, transport::auth::Role::connector, binding(b, b.rank, peer), challenge,
                                              peer_nonce[static_cast<size_t>(peer)]);
    std::memcpy(h.mac, proof.data(), sizeof h.mac);
    sp::send_record_until(kWho, fd.get(), &h, sizeof h, b.deadline);
    challenges[static_cast<size_t>(peer)] = challenge;
    socks[static_cast<size_t>(peer)] = std::move(fd);
    higher.push_back(peer);
  }

  // 3. Accept the lower ranks, checking each hello; a refused one is answered with the reason.
  int refused = 0;
  std::string last_refusal;
  while (lower > 0) {
    Fd fd;
    try {
      // Wake up now and then to see whether a peer gave up (and why).
      fd = sp::accept_until(kWho, listener.get(), std::min(b.deadline, Clock::now() + std::chrono::milliseconds(200)));
    } catch (const TimeoutError&) {
      const std::string refusals = refused ? "; refused " + std::to_string(refused) + " connection(s): " + last_refusal : "";
      transport::throw_if_peer_gave_up(b, refusals);
      if (Clock::now() < b.deadline) continue;
      std::string missing;
      for (int p = 0; p < b.size; ++p)
        if (want[static_cast<size_t>(p)]) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      throw TimeoutError("rank " + std::to_string(b.rank) + " timed out waiting for cuda_ipc connections from rank(s) " +
                         missing + refusals);
    }
    wire::Hello h{};
    size_t got = 0;
    try {
      got = sp::recv_record_until(kWho, fd.get(), &h, sizeof h, std::min(b.deadline, Clock::now() + std::chrono::seconds(10)));
    } catch (const Error& e) {
      ++refused;
      last_refusal = std::string("no valid handshake: ") + e.what();
      continue;
    }
    const HelloStatus st = check_hello(h, got, b, want, my_nonce);
    const int src = h.src_rank;
    wire::Hello reply = make_hello(b, st == HelloStatus::ok ? src : -1, st);
    if (st == HelloStatus::ok) {
      const auto proof =
          transport::auth::prove(b.secret, transport::auth::Role::acceptor, binding(b, src, b.rank), nonce_of(h), my_nonce);
      std::memcpy(reply.mac, proof.data(), sizeof reply.mac);
    }
    try {
      sp::send_record_until(kWho, fd.get(), &reply, sizeof reply, b.deadline);
    } catch (const Error&) {
      // The caller is gone; nothing to tell it.
    }
    if (st != HelloStatus::ok) {
      ++refused;
      last_refusal = std::string(transport::hello_status_text(st)) + (got == sizeof h ? " (claims rank " + std::to_string(src) + ")" : "");
      KOLO_LOG(warn, "cuda_ipc: refused a connection: " << last_refusal);
      continue;
    }
    want[static_cast<size_t>(src)] = false;
    --lower;
    socks[static_cast<size_t>(src)] = std::move(fd);
  }

  // 4. The higher ranks' answers.
  for (int peer : higher) {
    wire::Hello r{};
    size_t got = 0;
    try {
      got = sp::recv_record_until(kWho, socks[static_cast<size_t>(peer)].get(), &r, sizeof r, b.deadline);
    } catch (const TimeoutError&) {
      throw TimeoutError("rank " + std::to_string(peer) + " did not answer the cuda_ipc handshake of rank " +
                             std::to_string(b.rank) + " before the timeout",
                         peer);
    } catch (const Error& e) {
      throw PeerError("rank " + std::to_string(peer) + " closed the cuda_ipc connection during the handshake: " + e.what(), peer);
    }
    const HelloStatus st = got != sizeof r || r.magic != wire::kHelloMagic ? HelloStatus::bad_magic : static_cast<HelloStatus>(r.status);
    if (st != HelloStatus::ok)
      throw PeerError("rank " + std::to_string(peer) + " refused the cuda_ipc connection from rank " + std::to_string(b.rank) +
                          ": " + transport::hello_status_text(st),
                      peer);
    if (!transport::auth::same(mac_of(r), transport::auth::prove(b.secret, transport::auth::Role::acceptor,
                                                                 binding(b, b.rank, peer), challenges[static_cast<size_t>(peer)],
                                                                 peer_nonce[static_cast<size_t>(peer)])))
      throw PeerError("rank " + std::to_string(peer) + " accepted the cuda_ipc connection from rank " + std::to_string(b.rank) +
                          " but could not prove the job secret: " + transport::hello_status_text(HelloStatus::bad_secret),
                      peer);
  }

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
