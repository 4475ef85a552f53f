// The first bytes on every TCP connection: who is calling, for which group, and proof of the job
// secret by challenge-response (the secret itself never travels; see transports/common/auth.hpp).
//
//   connector -> Hello (magic, version, group, ranks, nonce C, proof over C and the acceptor's
//                published nonce A)
//   acceptor  -> HelloReply (status; when ok, the acceptor's proof over C and A)
#pragma once
#include <string>
#include <vector>

#include "transports/common/auth.hpp"
#include "transports/tcp/wire.hpp"
#include "transports/transport.hpp"

namespace kolo::tcp {

// Connecting side: announces itself to `peer`, whose device published `peer_nonce`; returns the
// challenge it sent.
// `tls`: this side has KOLO_TLS=1 and starts a TLS handshake once the reply is ok (the acceptor
// refuses a hello whose flag differs from its own setting: HelloStatus::tls_mismatch).
transport::auth::Nonce send_hello(int fd, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& peer_nonce,
                                  bool tls = false);
// Connecting side: reads the acceptor's verdict and checks its proof. Throws a clear error when
// refused, or when the acceptor cannot prove the secret.
void expect_hello_reply(int fd, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& sent,
                        const transport::auth::Nonce& peer_nonce);
// Accepting side, whose device published `mine`: reads and checks a hello and its proof, answers
// it. On success sets *peer and returns true; on refusal answers with the reason, sets *why and
// returns false. `want` marks the ranks that may still connect.
bool accept_hello(int fd, const transport::Bootstrap& b, const std::vector<bool>& want, const transport::auth::Nonce& mine,
                  int* peer, std::string* why);

// accept_hello's second half, for a hello already read (HelloInbox reads them without blocking).
bool answer_hello(int fd, const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want,
                  const transport::auth::Nonce& mine, int* peer, std::string* why, bool tls = false);

// The two halves of answer_hello, for the lazy acceptor (tcp_device.cpp), which decides what to
// answer an authenticated peer only once it knows who is calling (a simultaneous connect).
// verify_hello: check_hello, then the connector's proof; ok means the caller is rank h.src_rank
// of this group and holds the secret.
HelloStatus verify_hello(const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want,
                         const transport::auth::Nonce& mine, bool tls = false);
// Answers with `st` (with ok, this side's proof). Never throws: a caller that is gone hears nothing.
void reply_hello(int fd, const Hello& h, const transport::Bootstrap& b, HelloStatus st, const transport::auth::Nonce& mine);
// expect_hello_reply's checks of a reply already read (the lazy dialer reads it without blocking).
// Throws PeerError naming the peer when refused or when the peer cannot prove the secret.
void check_hello_reply(const HelloReply& r, const transport::Bootstrap& b, int peer, const transport::auth::Nonce& sent,
                       const transport::auth::Nonce& peer_nonce);

// The checks of a hello that need no secret: magic, version, group, ranks (pure: fuzzed).
HelloStatus check_hello(const Hello& h, const transport::Bootstrap& b, const std::vector<bool>& want);

using transport::group_hash;  // transports/common/setup_text.hpp

}  // namespace kolo::tcp
