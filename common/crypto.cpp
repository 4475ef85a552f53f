#include "common/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "kolo/error.hpp"

namespace kolo::crypto {

Digest sha256(const std::string& text) {
  Digest out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

void random_bytes(uint8_t* out, size_t n, const char* what) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) throw Error(std::string(what) + ": no random bytes (RAND_bytes failed)");
}

Digest hmac_sha256(const uint8_t* key, size_t key_bytes, const uint8_t* message, size_t message_bytes, const char* what) {
  Digest mac{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key, static_cast<int>(key_bytes), message, message_bytes, mac.data(), &len) == nullptr ||
      len != mac.size())
    throw Error(std::string(what) + ": HMAC-SHA256 failed");
  return mac;
}

bool same_bytes(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace kolo::crypto
