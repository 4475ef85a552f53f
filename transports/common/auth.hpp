// Proving the job secret on a new connection without sending it: challenge-response with
// HMAC-SHA256 (OpenSSL's libcrypto), shared by every transport's handshake.
//
// Every accepting device makes a fresh nonce when it starts listening and publishes it in the
// store beside its address. A connector sends a fresh nonce of its own and its proof over both
// in the hello; the acceptor checks it and answers with its proof over both, which the connector
// checks (so neither side talks to an impostor). One round trip, as before authentication, and
// no side ever waits for the other's progress inside the handshake. Each proof binds the role,
// the transport, the protocol version, the group and both ranks, so a proof captured on one
// connection is useless on any other: the acceptor's nonce changes with every group setup, and
// within one setup every rank is accepted once, so a replayed hello finds its rank taken. The
// wire carries nonces and MACs only: the secret never leaves the process.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo::transport::auth {

constexpr size_t kSecretBytes = 32;
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;
using Secret = std::array<uint8_t, kSecretBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// The job secret from the text users set (KOLO_SECRET, kolorun's per-job hex): SHA-256 of it,
// so any length of text becomes a full-strength HMAC key.
Secret derive_secret(const std::string& text);

// A nonce from the kernel's CSPRNG (OpenSSL RAND_bytes). Throws kolo::Error if none is available.
Nonce fresh_nonce();

enum class Role : uint8_t { acceptor = 'A', connector = 'C' };

// What a proof is bound to, besides the two nonces.
struct Binding {
  const char* transport;  // "tcp", "shm", ...
  uint32_t protocol_version;
  uint64_t group_hash;
  int32_t connector_rank;
  int32_t acceptor_rank;
  int32_t world_size;
};

// HMAC-SHA256(secret, role | binding | connector nonce | acceptor nonce).
Mac prove(const Secret& secret, Role role, const Binding& b, const Nonce& connector_nonce, const Nonce& acceptor_nonce);

// Constant-time comparison (CRYPTO_memcmp): a mismatch tells nothing of where it is.
bool same(const Mac& a, const Mac& b);

// Nonces travel through the store as hex.
std::string to_hex(const Nonce& n);
// False unless `hex` is exactly 2 * kNonceBytes hex digits.
bool from_hex(const std::string& hex, Nonce* out);

}  // namespace kolo::transport::auth
