#include "store/store_auth.hpp"

#include <algorithm>
#include <cstring>

#include "common/crypto.hpp"
#include "kolo/error.hpp"

namespace kolo::store_detail::auth {

static_assert(kKeyBytes == crypto::kDigestBytes && kMacBytes == crypto::kDigestBytes);

Key derive_key(const std::string& secret_text) { return crypto::sha256(secret_text); }

Nonce fresh_nonce() {
  Nonce n{};
  crypto::random_bytes(n.data(), n.size(), "TCPStore authentication: a nonce");
  return n;
}

Mac prove(const Key& key, Role role, const Nonce& client_nonce, const Nonce& server_nonce) {
  static const char kLabel[] = "kolo-store-auth-v1";
  uint8_t m[sizeof kLabel - 1 + 1 + 2 * kNonceBytes];
  uint8_t* p = m;
  p = std::copy(kLabel, kLabel + sizeof kLabel - 1, p);
  *p++ = static_cast<uint8_t>(role);
  p = std::copy(client_nonce.begin(), client_nonce.end(), p);
  std::copy(server_nonce.begin(), server_nonce.end(), p);
  return crypto::hmac_sha256(key.data(), key.size(), m, sizeof m, "TCPStore authentication");
}

bool same(const Mac& a, const Mac& b) { return crypto::same_bytes(a.data(), b.data(), a.size()); }

std::vector<uint8_t> client_hello(const Nonce& client_nonce) {
  std::vector<uint8_t> out;
  out.reserve(kClientHelloBytes);
  out.push_back(kAuthCode);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(kAuthMagic >> (8 * i)));
  out.insert(out.end(), client_nonce.begin(), client_nonce.end());
  return out;
}

std::optional<Mac> client_answer(const Key& key, const Nonce& client_nonce, const uint8_t (&reply)[kServerReplyBytes]) {
  Nonce server_nonce{};
  Mac server_proof{};
  std::memcpy(server_nonce.data(), reply, kNonceBytes);
  std::memcpy(server_proof.data(), reply + kNonceBytes, kMacBytes);
  if (!same(server_proof, prove(key, Role::server, client_nonce, server_nonce))) return std::nullopt;
  return prove(key, Role::client, client_nonce, server_nonce);
}

size_t ServerHandshake::wanted() const {
  switch (state_) {
    case State::kHello: return kClientHelloBytes - have_;
    case State::kProof: return kClientProofBytes - have_;
    default: return 0;
  }
}

ServerHandshake::Step ServerHandshake::refuse(std::string& why, std::string reason) {
  state_ = State::kRefused;
  why = std::move(reason);
  return Step::kRefused;
}

ServerHandshake::Step ServerHandshake::feed(const uint8_t* in, size_t size, std::vector<uint8_t>& out, std::string& why) {
  if (state_ == State::kRefused) return Step::kRefused;
  if (state_ == State::kDone) return Step::kDone;
  if (size > wanted()) return refuse(why, "internal error: more handshake bytes than asked for");
  std::memcpy(got_.data() + have_, in, size);
  const size_t before = have_;
  have_ += size;
  if (state_ == State::kHello) {
    // Judge every byte as soon as it arrives: a c10d client is refused on its first request
    // code, before it has sent (and the server has held) anything else.
    if (before == 0 && have_ >= 1 && got_[0] != kAuthCode) {
      const uint8_t code = got_[0];
      if (code <= 16) {
        return refuse(why, "sent a c10d request (code " + std::to_string(code) +
                               ") without authenticating first: a torch TCPStore client, or a kolo client without "
                               "the job secret (KOLO_SECRET) or with KOLO_STORE_AUTH=off");
      }
      return refuse(why, "sent garbage (first byte " + std::to_string(code) + ") instead of kolo's store authentication");
    }
    if (before < 5 && have_ >= 5) {
      uint32_t magic = 0;
      for (int i = 0; i < 4; ++i) magic |= uint32_t(got_[1 + i]) << (8 * i);
      if (magic != kAuthMagic) return refuse(why, "wrong store authentication magic (not kolo, or another version of it)");
    }
    if (have_ < kClientHelloBytes) return Step::kNeedMore;
    std::memcpy(client_nonce_.data(), got_.data() + 5, kNonceBytes);
    const Mac proof = prove(key_, Role::server, client_nonce_, server_nonce_);
    out.insert(out.end(), server_nonce_.begin(), server_nonce_.end());
    out.insert(out.end(), proof.begin(), proof.end());
    state_ = State::kProof;
    have_ = 0;
    return Step::kNeedMore;
  }
  if (have_ < kClientProofBytes) return Step::kNeedMore;
  Mac proof{};
  std::memcpy(proof.data(), got_.data(), kMacBytes);
  if (!same(proof, prove(key_, Role::client, client_nonce_, server_nonce_))) {
    return refuse(why, "wrong proof of the job secret (another KOLO_SECRET, or a proof replayed from another connection)");
  }
  state_ = State::kDone;
  return Step::kDone;
}

}  // namespace kolo::store_detail::auth
