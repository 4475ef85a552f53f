// The few primitives of OpenSSL's libcrypto that kolo's two handshakes use (the transports'
// connection hello, transports/common/auth.cpp, and the store's, src/store/store_auth.cpp):
// one place for them, below both layers.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo::crypto {

constexpr size_t kDigestBytes = 32;
using Digest = std::array<uint8_t, kDigestBytes>;

// SHA-256 of a text (a job secret of any length becomes a full-strength HMAC key).
Digest sha256(const std::string& text);

// `n` bytes from OpenSSL's CSPRNG (RAND_bytes). Throws kolo::Error("<what>: no random bytes
// (RAND_bytes failed)") if it has none.
void random_bytes(uint8_t* out, size_t n, const char* what);

// HMAC-SHA256(key, message). Throws kolo::Error("<what>: HMAC-SHA256 failed") on failure.
Digest hmac_sha256(const uint8_t* key, size_t key_bytes, const uint8_t* message, size_t message_bytes, const char* what);

// Constant-time comparison (CRYPTO_memcmp): a mismatch tells nothing of where it is.
bool same_bytes(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace kolo::crypto
