// The TCPStore server's state and request semantics, with no sockets: the keys, the queues and
// the parked WAITs, fed the bytes each connection sent (tcp_store_server.cpp owns the sockets).
// Kept apart so that the protocol can be fuzzed at memory speed (tests/fuzz/fuzz_store.cpp).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kolo/store.hpp"
#include "store/tcp_store_wire.hpp"

namespace kolo::store_detail {

// What a connection has shown of itself: c10d's clients of torch >= 2.1 open with VALIDATE + the
// magic number; older ones (torch 1.13, 2.0) send requests at once, in the legacy numbering.
enum class Hello : uint8_t { kUnknown, kLegacy, kValidated };

class StoreState {
 public:
  using ConnId = int;

  // Serves every complete request at the front of in[0, size) from connection `id` (whose
  // dialect state is `hello`), appending its replies to `out`. Returns how many bytes were
  // consumed (an incomplete request stays for later). Throws kolo::Error on garbage: the caller
  // drops the connection (and calls forget()).
  size_t serve(ConnId id, Hello& hello, const uint8_t* in, size_t size, std::vector<uint8_t>& out);

  // The connection is gone: drop its parked WAIT.
  void forget(ConnId id);

  // Connections whose parked WAIT was completed since the last call: each is owed one
  // STOP_WAITING byte.
  std::vector<ConnId> take_woken();

  uint64_t requests() const { return requests_; }
  uint64_t parked() const { return parked_.size(); }
  size_t keys() const { return data_.size(); }

 private:
  bool read_hello(Hello& hello, const uint8_t* in, size_t size, size_t& pos);
  void serve_request(ConnId fd, StoreOp op, WireReader& r, WireWriter& w);
  bool present(const std::string& key) const;
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  void park(ConnId fd, std::vector<std::string> keys);
  void unpark(ConnId fd);
  void key_changed(const std::string& key);
  void try_complete(ConnId fd);

  std::unordered_map<std::string, Bytes> data_;
  std::unordered_map<std::string, std::deque<Bytes>> queues_;
  std::unordered_map<ConnId, std::vector<std::string>> parked_;             // a WAIT's keys
  std::unordered_map<std::string, std::unordered_set<ConnId>> waiting_on_;  // key -> parked
  std::vector<ConnId> woken_;
  uint64_t requests_ = 0;
};

}  // namespace kolo::store_detail
