// libFuzzer target: the TCPStore server's protocol (StoreState: both c10d dialects, every op)
// fed arbitrary bytes from three connections, chunked at arbitrary points, as the socket loop
// feeds it. Invariants: no crash or sanitizer report; serve() never claims more bytes than it was
// given; garbage is refused with kolo::Error (the connection is then dropped and forgotten);
// nothing is allocated from a claimed length (ASan's allocation limit would catch it); parked
// WAITs never outnumber live connections; and a connection's unparsed input stays below one
// maximal request (what the socket loop enforces before calling serve()).
//
// The server's pre-authentication state (store_auth.hpp's ServerHandshake) is fuzzed too: when
// the input's first byte is odd, every connection must authenticate first, with a fixed secret
// and a fixed server nonce so that the fuzzer can get through. Its bytes go to the handshake,
// never more than it asks for (as the socket loop reads them), and then to StoreState; a chunk
// that starts with the byte 0xAC while a proof is wanted is replaced by the right proof for
// the nonce the connection sent, so that authenticated connections are reached too. Extra
// invariants: the handshake never asks for more than one step's bytes, a refused connection
// serves nothing, and StoreState never sees a byte of a connection that has not authenticated.
//
// Input: [u8 mode] then a sequence of [u8 connection (mod 3)][u8 chunk length][chunk bytes].
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <cstring>
#include <memory>
#include <string>

#include "kolo/error.hpp"
#include "store/store_auth.hpp"
#include "store/tcp_store_state.hpp"

using namespace kolo::store_detail;
namespace auth = kolo::store_detail::auth;

namespace {

struct Conn {
  Hello hello = Hello::kUnknown;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  bool open = true;
  std::unique_ptr<auth::ServerHandshake> gate;  // set while it must still authenticate
  auth::Nonce client_nonce{};                   // what its hello said, to forge the right proof
  std::vector<uint8_t> hello_bytes;
};

const auth::Key& fuzz_key() {
  static const auth::Key key = auth::derive_key("fuzz secret");
  return key;
}
constexpr auth::Nonce kServerNonce = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

Conn fresh(bool authenticate) {
  Conn c;
  if (authenticate) c.gate = std::make_unique<auth::ServerHandshake>(fuzz_key(), kServerNonce);
  return c;
}

// Feeds a chunk through the handshake as the socket loop would: at most wanted() bytes at a
// time. Returns the bytes left for StoreState (after authentication), or throws kolo::Error on
// a refusal (the caller drops the connection).
std::vector<uint8_t> through_gate(Conn& c, const uint8_t* data, size_t len) {
  if (!c.gate) return std::vector<uint8_t>(data, data + len);
  std::vector<uint8_t> chunk(data, data + len);
  // The forging rule: the proof the fuzzer cannot compute, when it asks for it with 0xAC.
  if (!chunk.empty() && chunk[0] == 0xAC && c.gate->wanted() == auth::kMacBytes && c.hello_bytes.size() == auth::kClientHelloBytes) {
    std::memcpy(c.client_nonce.data(), c.hello_bytes.data() + 5, auth::kNonceBytes);
    auth::Mac proof = auth::prove(fuzz_key(), auth::Role::client, c.client_nonce, kServerNonce);
    chunk.assign(proof.begin(), proof.end());
  }
  size_t pos = 0;
  std::vector<uint8_t> reply;
  std::string why;
  while (pos < chunk.size() && c.gate) {
    const size_t want = c.gate->wanted();
    if (want == 0 || want > auth::kMacBytes) std::abort();
    const size_t n = std::min(want, chunk.size() - pos);
    if (c.hello_bytes.size() < auth::kClientHelloBytes) {
      const size_t h = std::min(n, auth::kClientHelloBytes - c.hello_bytes.size());
      c.hello_bytes.insert(c.hello_bytes.end(), chunk.begin() + pos, chunk.begin() + pos + h);
    }
    auto step = c.gate->feed(chunk.data() + pos, n, reply, why);
    pos += n;
    if (step == auth::ServerHandshake::Step::kRefused) {
      if (why.empty()) std::abort();
      throw kolo::Error(why);
    }
    if (step == auth::ServerHandshake::Step::kDone) c.gate.reset();
  }
  if (reply.size() != 0 && reply.size() != auth::kServerReplyBytes) std::abort();
  return std::vector<uint8_t>(chunk.begin() + pos, chunk.end());
}


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool authenticate = data[0] & 1;
  StoreState state;
  Conn conns[3] = {fresh(authenticate), fresh(authenticate), fresh(authenticate)};
  size_t pos = 1;
  while (pos + 2 <= size) {
    const int id = data[pos] % 3;
    size_t len = data[pos + 1];
    pos += 2;
    if (len > size - pos) len = size - pos;
    Conn& c = conns[id];
    if (!c.open) {  // a dropped connection comes back as a fresh one, as a reconnecting client does
      c = fresh(authenticate);
    }
    const uint64_t served_before = state.requests();
    const uint8_t* chunk = data + pos;
    pos += len;
    try {
      const std::vector<uint8_t> past_gate = through_gate(c, chunk, len);
      if (c.gate && !past_gate.empty()) std::abort();  // nothing reaches the store before authentication
      c.in.insert(c.in.end(), past_gate.begin(), past_gate.end());
      if (c.gate) {
        if (state.requests() != served_before) std::abort();
        continue;
      }
      size_t used = state.serve(id, c.hello, c.in.data(), c.in.size(), c.out);
      if (used > c.in.size()) std::abort();
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(used));
    } catch (const kolo::Error&) {
      state.forget(id);
      c.open = false;
    }
    for (int woken : state.take_woken()) {
      if (woken < 0 || woken > 2) std::abort();
      conns[woken].out.push_back(kStopWaiting);
    }
    int open = 0;
    for (const auto& k : conns) open += k.open ? 1 : 0;
    if (state.parked() > 3) std::abort();
    if (c.in.size() > size) std::abort();
    c.out.clear();  // replies are checked for form by the unit tests; here only bounds matter
  }
  return 0;
}
