// The authenticated handshake on the seqpacket control sockets of the transports that keep one
// per pair (shm, cuda_ipc). Connecting never waits for the peer to accept (the kernel queues the
// connection), so every rank first connects to its higher peers, each hello carrying a fresh
// challenge and the proof of the job secret over the nonce the acceptor published; then accepts
// its lower peers, checks each hello (magic, version, group, ranks, proof: transports/common/auth.hpp)
// and answers with its own proof, or with the reason it refuses, counting the refusals; then reads
// the higher peers' answers and checks their proofs. The wait for the lower peers wakes every
// 200 ms to see whether one of them gave up elsewhere, and says why.
//
// Beside the interface, not in transports/common: it speaks the Bootstrap and setup-failure
// terms of transports/*.hpp, which transports/common may not include (folder arrows run one way).
//
// Hello is the transport's record. It has at least magic, protocol_version, nonce[16], group_hash,
// src_rank, dst_rank, world_size, status and mac[32]; `extra` fills the transport's own fields
// (shm: the word a peer may read with process_vm_readv).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "kolo/error.hpp"
#include "transports/common/auth.hpp"
#include "transports/common/fd.hpp"
#include "transports/common/seqpacket.hpp"
#include "transports/common/setup_text.hpp"
#include "transports/setup_failure.hpp"

namespace kolo::transport::seqpacket {

// How a transport names itself in the handshake.
struct HandshakeNames {
  const char* who;         // the socket calls' errors ("shm transport")
  const char* log_tag;     // the log's ("shm")
  const char* connection;  // the errors' word for the connection ("shared-memory")
  const char* protocol;    // the transport in the proofs' binding ("shm")
  uint32_t version;        // its protocol version, in hellos and proofs
  uint32_t magic;          // its hellos' magic
};

template <class Hello>
class Handshake {
 public:
  Handshake(const Bootstrap& b, const HandshakeNames& names, const auth::Nonce& my_nonce,
            std::function<void(Hello&)> extra = {})
      : b_(b), n_(names), mine_(my_nonce), extra_(std::move(extra)) {}

  // The sockets by peer rank, and each peer's hello: a lower peer's connecting hello, a higher
  // peer's answer.
  struct Connected {
    std::vector<Fd> socks;
    std::vector<Hello> their;
  };

  // Connects to `peers` through `listen_fd` (this rank's) and, for each higher peer p, the
  // abstract name it listens on (`address[p]`) and the nonce it published (`nonce[p]`).
  Connected run(const std::vector<int>& peers, int listen_fd, const std::vector<std::string>& address,
                const std::vector<auth::Nonce>& nonce) const {
    const size_t n = static_cast<size_t>(b_.size);
    Connected c{std::vector<Fd>(n), std::vector<Hello>(n)};
    std::vector<auth::Nonce> challenges(n);
    std::vector<bool> want(n, false);
    std::vector<int> higher;
    int lower = 0;
    for (int peer : peers) {
      const size_t p = static_cast<size_t>(peer);
      if (peer < b_.rank) {
        want[p] = true;
        ++lower;
        continue;
      }
      Fd fd = connect_abstract_until(n_.who, address[p], b_.deadline);
      Hello h = hello(peer, HelloStatus::ok);
      challenges[p] = auth::fresh_nonce();
      std::memcpy(h.nonce, challenges[p].data(), sizeof h.nonce);
      const auth::Mac proof = auth::prove(b_.secret, auth::Role::connector, binding(b_.rank, peer), challenges[p], nonce[p]);
      std::memcpy(h.mac, proof.data(), sizeof h.mac);
      send_record_until(n_.who, fd.get(), &h, sizeof h, b_.deadline);
      c.socks[p] = std::move(fd);
      higher.push_back(peer);
    }
    accept_lower(listen_fd, lower, want, c);
    for (int peer : higher) c.their[static_cast<size_t>(peer)] = answer_of(peer, c.socks[static_cast<size_t>(peer)].get(),
                                                                           challenges[static_cast<size_t>(peer)],
                                                                           nonce[static_cast<size_t>(peer)]);
    return c;
  }

 private:
  auth::Binding binding(int connector, int acceptor) const {
    return {n_.protocol, n_.version, group_hash(b_.prefix), connector, acceptor, b_.size};
  }
  static auth::Mac mac_of(const Hello& h) {
    auth::Mac m{};
    std::memcpy(m.data(), h.mac, m.size());
    return m;
  }
  static auth::Nonce nonce_of(const Hello& h) {
    auth::Nonce v{};
    std::memcpy(v.data(), h.nonce, v.size());
    return v;
  }
  std::string rank_text(int r) const { return "rank " + std::to_string(r); }

  // A connector's hello carries its challenge and its proof; a reply carries the acceptor's proof.
  Hello hello(int peer, HelloStatus status) const {
    Hello h{};
    h.magic = n_.magic;
    h.protocol_version = n_.version;
    h.group_hash = group_hash(b_.prefix);
    h.src_rank = b_.rank;
    h.dst_rank = peer;
    h.world_size = b_.size;
    h.status = static_cast<uint32_t>(status);
    if (extra_) extra_(h);
    return h;
  }

  HelloStatus check(const Hello& h, size_t got, const std::vector<bool>& want) const {
    if (got != sizeof h || h.magic != n_.magic) return HelloStatus::bad_magic;
    if (h.protocol_version != n_.version) return HelloStatus::bad_version;
    if (h.group_hash != group_hash(b_.prefix) || h.world_size != b_.size || h.dst_rank != b_.rank) return HelloStatus::bad_group;
    if (h.src_rank < 0 || h.src_rank >= b_.size || !want[static_cast<size_t>(h.src_rank)]) return HelloStatus::bad_rank;
    if (!auth::same(mac_of(h), auth::prove(b_.secret, auth::Role::connector, binding(h.src_rank, b_.rank), nonce_of(h), mine_)))
      return HelloStatus::bad_secret;
    return HelloStatus::ok;
  }

  void accept_lower(int listen_fd, int lower, std::vector<bool>& want, Connected& c) const {
    int refused = 0;
    std::string last_refusal;
    while (lower > 0) {
      Fd fd;
      try {
        // Wake up now and then to see whether a peer gave up (and why).
        fd = accept_until(n_.who, listen_fd, std::min(b_.deadline, Clock::now() + std::chrono::milliseconds(200)));
      } catch (const TimeoutError&) {
        const std::string refusals = refused ? "; refused " + std::to_string(refused) + " connection(s): " + last_refusal : "";
        throw_if_peer_gave_up(b_, refusals);
        if (Clock::now() < b_.deadline) continue;
        std::string missing;
        for (int p = 0; p < b_.size; ++p)
          if (want[static_cast<size_t>(p)]) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        throw TimeoutError(rank_text(b_.rank) + " timed out waiting for " + n_.connection + " connections from rank(s) " +
                           missing + refusals);
      }
      Hello h{};
      size_t got = 0;
      try {
        got = recv_record_until(n_.who, fd.get(), &h, sizeof h, std::min(b_.deadline, Clock::now() + std::chrono::seconds(10)));
      } catch (const Error& e) {
        ++refused;
        last_refusal = std::string("no valid handshake: ") + e.what();
        continue;
      }
      const HelloStatus st = check(h, got, want);
      const int src = h.src_rank;
      Hello reply = hello(st == HelloStatus::ok ? src : -1, st);
      if (st == HelloStatus::ok) {
        const auth::Mac proof = auth::prove(b_.secret, auth::Role::acceptor, binding(src, b_.rank), nonce_of(h), mine_);
        std::memcpy(reply.mac, proof.data(), sizeof reply.mac);
      }
      try {
        send_record_until(n_.who, fd.get(), &reply, sizeof reply, b_.deadline);
      } catch (const Error&) {
        // The caller is gone; nothing to tell it.
      }
      if (st != HelloStatus::ok) {
        ++refused;
        last_refusal = std::string(hello_status_text(st)) + (got == sizeof h ? " (claims rank " + std::to_string(src) + ")" : "");
        KOLO_LOG(warn, n_.log_tag << ": refused a connection: " << last_refusal);
        continue;
      }
      want[static_cast<size_t>(src)] = false;
      --lower;
      c.their[static_cast<size_t>(src)] = h;
      c.socks[static_cast<size_t>(src)] = std::move(fd);
    }
  }

  // A higher peer's answer to this rank's hello, its proof checked.
  Hello answer_of(int peer, int fd, const auth::Nonce& challenge, const auth::Nonce& peer_nonce) const {
    Hello r{};
    size_t got = 0;
    try {
      got = recv_record_until(n_.who, fd, &r, sizeof r, b_.deadline);
    } catch (const TimeoutError&) {
      throw TimeoutError(rank_text(peer) + " did not answer the " + n_.connection + " handshake of rank " +
                             std::to_string(b_.rank) + " before the timeout",
                         peer);
    } catch (const Error& e) {
      throw PeerError(rank_text(peer) + " closed the " + n_.connection + " connection during the handshake: " + e.what(), peer);
    }
    const HelloStatus st = got != sizeof r || r.magic != n_.magic ? HelloStatus::bad_magic : static_cast<HelloStatus>(r.status);
    if (st != HelloStatus::ok)
      throw PeerError(rank_text(peer) + " refused the " + n_.connection + " connection from rank " + std::to_string(b_.rank) +
                          ": " + hello_status_text(st),
                      peer);
    if (!auth::same(mac_of(r), auth::prove(b_.secret, auth::Role::acceptor, binding(b_.rank, peer), challenge, peer_nonce)))
      throw PeerError(rank_text(peer) + " accepted the " + n_.connection + " connection from rank " + std::to_string(b_.rank) +
                          " but could not prove the job secret: " + hello_status_text(HelloStatus::bad_secret),
                      peer);
    return r;
  }

  const Bootstrap& b_;
  HandshakeNames n_;
  auth::Nonce mine_;
  std::function<void(Hello&)> extra_;
};

}  // namespace kolo::transport::seqpacket
