#include "transports/tcp/handshake.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kolo/error.hpp"
#include "kolo/version.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"

namespace kolo::tcp {

namespace {

transport::auth::Binding binding(const transport::Bootstrap& b, int connector, int acceptor) {
  return {"tcp", static_cast<uint32_t>(kProtocolVersion), group_hash(b.prefix), connector, acceptor, b.size};
}

}  // namespace

HelloStatus check_hello(const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want) {
  if (h.magic != kHelloMagic) return HelloStatus::bad_magic;
  if (h.protocol_version != static_cast<uint32_t>(kProtocolVersion)) return HelloStatus::bad_version;
  if (h.group_hash != group_hash(b.prefix) || h.world_size != b.size || h.dst_rank != b.rank) return HelloStatus::bad_group;
  if (h.src_rank < 0 || h.src_rank >= b.size || static_cast<size_t>(h.src_rank) >= want.size() ||
      !want[static_cast<size_t>(h.src_rank)])
    return HelloStatus::bad_rank;
  return HelloStatus::ok;
}

transport::auth::Nonce send_hello(int fd, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& peer_nonce,
                                  bool tls) {
  using namespace transport::auth;
  Hello h{};
  h.magic = kHelloMagic;
  h.protocol_version = static_cast<uint32_t>(kProtocolVersion);
  const Nonce mine = fresh_nonce();
  std::memcpy(h.nonce, mine.data(), sizeof h.nonce);
  h.group_hash = group_hash(b.prefix);
  h.src_rank = b.rank;
  h.dst_rank = peer;
  h.world_size = b.size;
  h.reserved = tls ? kHelloTls : 0;
  const Mac mac = prove(b.secret, Role::connector, binding(b, b.rank, peer), mine, peer_nonce);
  std::memcpy(h.mac, mac.data(), sizeof h.mac);
  write_all_until(fd, &h, sizeof h, b.deadline);
  return mine;
}

void expect_hello_reply(int fd, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& sent,
                        const transport::auth::Nonce& peer_nonce) {
  const std::string who = "rank " + std::to_string(peer);
  HelloReply r{};
  try {
    read_all_until(fd, &r, sizeof r, b.deadline);
  } catch (const TimeoutError&) {
    throw TimeoutError(who + " did not answer the connection handshake of rank " + std::to_string(b.rank) + " before the timeout",
                       peer);
  } catch (const Error& e) {
    throw PeerError(who + " closed the connection during the handshake: " + e.what(), peer);
  }
  check_hello_reply(r, b, peer, sent, peer_nonce);
}

void check_hello_reply(const HelloReply& r, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& sent,
                       const transport::auth::Nonce& peer_nonce) {
  using namespace transport::auth;
  const std::string who = "rank " + std::to_string(peer);
  if (r.magic != kHelloMagic || r.status != HelloStatus::ok)
    throw PeerError(who + " refused the connection from rank " + std::to_string(b.rank) + ": " +
                        hello_status_text(r.magic == kHelloMagic ? r.status : HelloStatus::bad_magic),
                    peer);
  Mac theirs{};
  std::memcpy(theirs.data(), r.mac, theirs.size());
  if (!same(theirs, prove(b.secret, Role::acceptor, binding(b, b.rank, peer), sent, peer_nonce)))
    throw PeerError(who + " accepted the connection from rank " + std::to_string(b.rank) +
                        " but could not prove the job secret: " + hello_status_text(HelloStatus::bad_secret),
                    peer);
}

bool accept_hello(int fd, const transport::Bootstrap& b, const std::vector<bool>& want, const transport::auth::Nonce& mine,
                  int* peer, std::string* why) {
  Hello h{};
  // A caller that connects and says nothing (or stops halfway) must not stall setup for long.
  try {
    read_all_until(fd, &h, sizeof h, std::min(b.deadline, Clock::now() + std::chrono::seconds(10)));
  } catch (const Error& e) {
    *why = std::string("no valid handshake: ") + e.what();
    return false;
  }
  return answer_hello(fd, h, b, want, mine, peer, why);
}

bool answer_hello(int fd, const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want,
                  const transport::auth::Nonce& mine, int* peer, std::string* why, bool tls) {
  const HelloStatus st = verify_hello(h, b, want, mine, tls);
  reply_hello(fd, h, b, st, mine);
  if (st != HelloStatus::ok) {
    *why = std::string(hello_status_text(st)) + (h.magic == kHelloMagic ? " (claims rank " + std::to_string(h.src_rank) + ")" : "");
    return false;
  }
  *peer = h.src_rank;
  return true;
}

HelloStatus verify_hello(const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want,
                         const transport::auth::Nonce& mine, bool tls) {
  using namespace transport::auth;
  const HelloStatus st = check_hello(h, b, want);
  if (st != HelloStatus::ok) return st;
  if (((h.reserved & kHelloTls) != 0) != tls) return HelloStatus::tls_mismatch;
  Nonce theirs{};
  Mac their_mac{};
  std::memcpy(theirs.data(), h.nonce, theirs.size());
  std::memcpy(their_mac.data(), h.mac, their_mac.size());
  return same(their_mac, prove(b.secret, Role::connector, binding(b, h.src_rank, b.rank), theirs, mine)) ? HelloStatus::ok
                                                                                                          : HelloStatus::bad_secret;
}

void reply_hello(int fd, const Hello& h, const transport::Bootstrap& b, HelloStatus st, const transport::auth::Nonce& mine) {
  using namespace transport::auth;
  HelloReply r{kHelloMagic, st, {}};
  if (st == HelloStatus::ok) {
    Nonce theirs{};
    std::memcpy(theirs.data(), h.nonce, theirs.size());
    const Mac reply = prove(b.secret, Role::acceptor, binding(b, h.src_rank, b.rank), theirs, mine);
    std::memcpy(r.mac, reply.data(), sizeof r.mac);
  }
  try {
    write_all_until(fd, &r, sizeof r, std::min(b.deadline, Clock::now() + std::chrono::seconds(10)));
  } catch (const Error&) {
    // The caller is gone; nothing to tell it.
  }
}

}  // namespace kolo::tcp
