// Pieces of connection setup that every transport shares, so that none includes another's
// headers: the verdicts a hello can get and their wording, the hash that tells groups apart, and
// errno's text.
#pragma once
#include <cstdint>
#include <string>

namespace kolo::transport {

// The acceptor's verdict on a hello (the wire value of tcp's and shm's replies).
enum class HelloStatus : uint32_t { ok = 0, bad_magic = 1, bad_version = 2, bad_secret = 3, bad_group = 4, bad_rank = 5,
                                  // tcp, lazy connections: both ranks dialled at once and the acceptor's own
                                  // connection (the lower rank's) is the one kept: wait for it
                                  crossed = 6,
                                  // tcp: one side has KOLO_TLS=1, the other not
                                  tls_mismatch = 7 };
const char* hello_status_text(HelloStatus s);

// Tells groups apart in hellos and segment names (FNV-1a of the store prefix): not a secret, and
// not meant to resist attackers (the secret's proof does that).
uint64_t group_hash(const std::string& prefix);

// strerror_r's text plus the number, e.g. "Connection refused (errno 111)".
std::string errno_text(int err);

}  // namespace kolo::transport
