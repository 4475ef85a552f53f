// Authentication on kolo's own TCPStore: mutual challenge-response over the job secret, before
// any c10d request, on connections where kolo is at both ends (KOLO_STORE_AUTH, see
// docs/RELIABILITY.md "Authentication"). torch's TCPStore clients and servers cannot take part,
// so a store that must serve them runs without it.
//
// The sequence, on every new connection (and every reconnect) of an authenticating client:
//   client -> server  AUTH_HELLO: [u8 kAuthCode][u32 kAuthMagic][client nonce (16)]
//   server -> client  [server nonce (16)][HMAC(key, "kolo-store-auth-v1" 'S' client server)]
//   client -> server  [HMAC(key, "kolo-store-auth-v1" 'C' client server)]
//   ... then c10d's protocol, unchanged (VALIDATE, PING, SET, ...).
// The client checks the server's proof before it sends its own, so a store without the secret
// (a rogue one feeding ranks false addresses) is refused before the client says anything it
// could replay; the server checks the client's proof before it reads any c10d request, so a
// client without the secret reads and writes nothing. Each side's nonce is fresh per connection
// and each proof covers both nonces and the prover's role, so a captured proof is worthless on
// another connection, and one side's proof cannot be reflected back as the other's. The label
// "kolo-store-auth-v1" keeps these proofs apart from the transports' hello proofs
// (transports/common/auth.cpp, label "kolo-auth-v1"): neither can stand in for the other.
//
// kAuthCode (0xA7) is no request code of either c10d dialect (they end at 16), so a server with
// authentication off drops an authenticating client at once, and a server with it on drops a
// c10d client on its first byte.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kolo::store_detail::auth {

constexpr uint8_t kAuthCode = 0xA7;
constexpr uint32_t kAuthMagic = 0x3141534B;  // "KSA1" in the wire's little-endian order
constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;
constexpr size_t kClientHelloBytes = 1 + 4 + kNonceBytes;
constexpr size_t kServerReplyBytes = kNonceBytes + kMacBytes;
constexpr size_t kClientProofBytes = kMacBytes;

using Key = std::array<uint8_t, kKeyBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// The HMAC key from the job secret's text (KOLO_SECRET): its SHA-256, as the transports derive
// theirs, so both ends of a job agree whatever the text's length.
Key derive_key(const std::string& secret_text);

// 16 bytes from OpenSSL's CSPRNG. Throws kolo::Error if it has none.
Nonce fresh_nonce();

enum class Role : uint8_t { server = 'S', client = 'C' };

// HMAC-SHA256(key, "kolo-store-auth-v1" | role | client nonce | server nonce).
Mac prove(const Key& key, Role role, const Nonce& client_nonce, const Nonce& server_nonce);

// Constant-time comparison.
bool same(const Mac& a, const Mac& b);

// The client's first message.
std::vector<uint8_t> client_hello(const Nonce& client_nonce);

// The client's answer to the server's reply: its own proof, or nullopt when the server's proof
// is wrong (the server does not hold this secret).
std::optional<Mac> client_answer(const Key& key, const Nonce& client_nonce, const uint8_t (&reply)[kServerReplyBytes]);

// The server's side of one connection's handshake, without sockets (tcp_store_server.cpp feeds
// it, and so does the fuzzer). It never buffers: wanted() says how many bytes the current step
// still needs, and the caller reads no more than that before calling feed(), so what an
// unauthenticated peer can make the server hold is bounded by kMacBytes.
class ServerHandshake {
 public:
  enum class Step : uint8_t { kNeedMore, kDone, kRefused };

  // server_nonce: fresh_nonce() in the server; fixed in the fuzzer so that it can answer.
  ServerHandshake(const Key& key, const Nonce& server_nonce) : key_(key), server_nonce_(server_nonce) {}

  // Bytes the current step still needs (0 once done or refused).
  size_t wanted() const;

  // Consumes bytes [in, in + size) (size <= wanted()), appending the server's reply to `out`
  // when the hello is complete. kRefused comes with the reason in `why`; the caller then drops
  // the connection and logs it. Garbage is refused as soon as a byte shows it (a c10d client's
  // first request code is enough).
  Step feed(const uint8_t* in, size_t size, std::vector<uint8_t>& out, std::string& why);

  bool done() const { return state_ == State::kDone; }

 private:
  enum class State : uint8_t { kHello, kProof, kDone, kRefused };
  Step refuse(std::string& why, std::string reason);

  Key key_;
  Nonce server_nonce_;
  Nonce client_nonce_{};
  State state_ = State::kHello;
  std::array<uint8_t, (kClientHelloBytes > kClientProofBytes ? kClientHelloBytes : kClientProofBytes)> got_{};  // this step's bytes so far
  size_t have_ = 0;
};

}  // namespace kolo::store_detail::auth
