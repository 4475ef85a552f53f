#include "transports/common/auth.hpp"

#include <cstring>
#include <vector>

#include "common/crypto.hpp"
#include "kolo/error.hpp"

namespace kolo::transport::auth {

static_assert(kSecretBytes == crypto::kDigestBytes && kMacBytes == crypto::kDigestBytes);

Secret derive_secret(const std::string& text) { return crypto::sha256(text); }

Nonce fresh_nonce() {
  Nonce n{};
  crypto::random_bytes(n.data(), n.size(), "auth: a handshake nonce");
  return n;
}

namespace {
template <class T>
void put(std::vector<uint8_t>& m, T v) {
  uint8_t b[sizeof v];
  std::memcpy(b, &v, sizeof v);  // little-endian hosts only, like the rest of the wire
  m.insert(m.end(), b, b + sizeof v);
}
}  // namespace

Mac prove(const Secret& secret, Role role, const Binding& b, const Nonce& connector_nonce, const Nonce& acceptor_nonce) {
  // A fixed layout: label, role, transport name with its length, the numbers, both nonces.
  std::vector<uint8_t> m;
  m.reserve(96);
  static const char kLabel[] = "kolo-auth-v1";
  m.insert(m.end(), kLabel, kLabel + sizeof kLabel - 1);
  m.push_back(static_cast<uint8_t>(role));
  const size_t tlen = std::strlen(b.transport);
  put<uint32_t>(m, static_cast<uint32_t>(tlen));
  m.insert(m.end(), b.transport, b.transport + tlen);
  put(m, b.protocol_version);
  put(m, b.group_hash);
  put(m, b.connector_rank);
  put(m, b.acceptor_rank);
  put(m, b.world_size);
  m.insert(m.end(), connector_nonce.begin(), connector_nonce.end());
  m.insert(m.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  return crypto::hmac_sha256(secret.data(), secret.size(), m.data(), m.size(), "auth");
}

std::string to_hex(const Nonce& n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n.size());
  for (uint8_t c : n) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

bool from_hex(const std::string& hex, Nonce* out) {
  if (hex.size() != 2 * kNonceBytes) return false;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < kNonceBytes; ++i) {
    int hi = val(hex[2 * i]), lo = val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

bool same(const Mac& a, const Mac& b) { return crypto::same_bytes(a.data(), b.data(), a.size()); }

}  // namespace kolo::transport::auth
