// libFuzzer target: the accepting side of the TCP handshake (tcp::answer_hello) fed arbitrary
// hello bytes. Invariants: no crash or sanitizer report; the acceptor always answers with a
// well-formed reply; every refusal says why; and an input is accepted only if its MAC is the real
// proof made with the job secret (the corpus holds one such signed hello, made independently
// with Python's hmac, so the accepted path is exercised too).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kolo/store.hpp"
#include "kolo/version.hpp"
#include "transports/common/auth.hpp"
#include "transports/tcp/handshake.hpp"
#include "transports/tcp/wire.hpp"

using namespace kolo;

namespace {

struct Harness {
  int sp[2];
  transport::Bootstrap b;
  transport::auth::Nonce published{};
  Harness() {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) != 0) std::abort();
    b.prefix = "fuzz";
    b.rank = 1;
    b.size = 4;
    b.secret = transport::auth::derive_secret("fuzz-job-secret");
    published.fill(0x5a);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  tcp::Hello hello{};
  std::memcpy(&hello, data, size < sizeof hello ? size : sizeof hello);
  h.b.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const std::vector<bool> want = {true, false, true, true};
  int peer = -1;
  std::string why;
  const bool accepted = tcp::answer_hello(h.sp[0], hello, h.b, want, h.published, &peer, &why);
  tcp::HelloReply reply{};
  if (::recv(h.sp[1], &reply, sizeof reply, 0) != static_cast<ssize_t>(sizeof reply)) std::abort();  // always answered
  if (reply.magic != tcp::kHelloMagic) std::abort();
  if (accepted != (reply.status == tcp::HelloStatus::ok)) std::abort();
  if (accepted) {
    // Only a hello whose MAC is the real proof may pass.
    transport::auth::Nonce theirs{};
    std::memcpy(theirs.data(), hello.nonce, theirs.size());
    const transport::auth::Binding bind{"tcp", static_cast<uint32_t>(kProtocolVersion), tcp::group_hash("fuzz"), hello.src_rank, 1, 4};
    transport::auth::Mac m{};
    std::memcpy(m.data(), hello.mac, m.size());
    if (!transport::auth::same(m, transport::auth::prove(h.b.secret, transport::auth::Role::connector, bind, theirs, h.published)))
      std::abort();
    if (peer != hello.src_rank || peer == 1 || peer < 0 || peer >= 4) std::abort();
  } else if (why.empty()) {
    std::abort();  // every refusal says why
  }
  return 0;
}
