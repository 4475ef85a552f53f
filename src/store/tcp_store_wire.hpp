// The TCPStore wire protocol: PyTorch c10d's, so that kolo ranks join torchrun's agent store,
// and torch's TCPStore clients use a store that kolo hosts (and the reverse).
//
// c10d's protocol has no frames: a request is [u8 op] followed by the op's fields; a reply is just
// its fields. Integers are little-endian (c10d sends host order; every host kolo supports is
// little-endian). A key or a value is [u64 length][bytes]; a key list is [u64 count][key]...
//
// Two dialects share that encoding and differ only in op numbers:
//   kLegacy     torch 1.x and 2.0 (1.13 is tested): no handshake. SET 0, COMPARE_SET 1, GET 2,
//               ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8, and 2.0's
//               APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12.
//   kValidated  torch 2.1 and later: a connection starts with VALIDATE 0 + u32 magic 0x3C85F7CE;
//               then SET 1 ... GETNUMKEYS 7, DELETE_KEY 8 ... CANCEL_WAIT 12, PING 13,
//               QUEUE_PUSH 14, QUEUE_POP 15, QUEUE_LEN 16.
// Requests and their replies, in both dialects:
//   VALIDATE magic(u32)          -> nothing
//   PING nonce(u32)              -> nonce(u32)
//   SET key value                -> nothing
//   COMPARE_SET key exp desired  -> value now stored (exp when the key is absent and exp non-empty)
//   GET key                      -> value (clients WAIT first; an absent key ends the connection)
//   ADD key delta(i64)           -> new value(i64) (a non-integer value ends the connection)
//   CHECK keys                   -> u8: READY 0 / NOT_READY 1
//   WAIT keys                    -> u8 STOP_WAITING 0 once every key exists (no server timeout)
//   CANCEL_WAIT                  -> u8 WAIT_CANCELED 1 (after a STOP_WAITING that won the race)
//   GETNUMKEYS                   -> i64 (every key, c10d's "init/" counter included)
//   DELETE_KEY key               -> i64 number deleted
//   APPEND key value             -> nothing
//   MULTI_GET keys               -> one value per key
//   MULTI_SET count (key value)* -> nothing
//   QUEUE_PUSH key value         -> nothing
//   QUEUE_POP key                -> i64 length before the pop, then the value when it was > 0
//   QUEUE_LEN key                -> i64
// The protocol has no authentication and no encryption. Where kolo is at both ends, kolo's
// store authentication (store_auth.hpp, request code 0xA7, which neither dialect uses) comes
// first on every connection; see docs/RELIABILITY.md "Authentication".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::store_detail {

enum class StoreOp : uint8_t {
  kValidate,
  kPing,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kQueuePush,
  kQueuePop,
  kQueueLen,
};

enum class Dialect : uint8_t { kLegacy, kValidated };

constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kCheckReady = 0;
constexpr uint8_t kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0;
constexpr uint8_t kWaitCanceled = 1;

// Bounds on what a peer may claim; anything larger is garbage and ends the connection before a
// byte is allocated for it. A store value is a rendezvous record, not bulk data.
constexpr uint64_t kMaxKeyBytes = 64u << 10;
constexpr uint64_t kMaxValueBytes = 256u << 20;
constexpr uint64_t kMaxKeyCount = 1u << 20;

// c10d's client prefixes every user key with "/", and counts its clients in "init/".
inline constexpr const char* kUserKeyPrefix = "/";
inline constexpr const char* kInitKey = "init/";

const char* op_name(StoreOp op);
const char* dialect_name(Dialect d);
// The op's number in a dialect, or nullopt when the dialect has no such op.
std::optional<uint8_t> encode_op(StoreOp op, Dialect d);
std::optional<StoreOp> decode_op(uint8_t code, Dialect d);

// Builds one request or reply.
class WireWriter {
 public:
  // Throws InvalidArgument when the dialect has no such op.
  WireWriter& op(StoreOp op, Dialect d);
  WireWriter& u8(uint8_t v);
  WireWriter& u32(uint32_t v);
  WireWriter& i64(int64_t v);
  WireWriter& key(const std::string& k);  // throws InvalidArgument beyond kMaxKeyBytes
  WireWriter& value(const Bytes& v);       // throws InvalidArgument beyond kMaxValueBytes
  WireWriter& keys(const std::vector<std::string>& ks);
  const std::vector<uint8_t>& bytes() const { return buf_; }
  void clear() { buf_.clear(); }

 private:
  void raw(uint64_t v, int bytes);
  std::vector<uint8_t> buf_;
};

// Reads fields from a buffer that may hold only part of a message. Running off the end throws
// NeedMore (wait for more bytes and parse again from the start); a length beyond its bound throws
// kolo::Error (garbage: drop the connection).
class WireReader {
 public:
  struct NeedMore {};
  WireReader(const uint8_t* data, size_t size) : begin_(data), p_(data), end_(data + size) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  uint64_t u64();
  std::string key();
  Bytes value();
  std::vector<std::string> keys();
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  void need(uint64_t n);
  uint64_t length(uint64_t cap, const char* what);
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace kolo::store_detail
