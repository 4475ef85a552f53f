// The TCPStore wire protocol, shared by the server and the client.
//
// Every message is a frame: [u32 payload length][payload], integers little-endian.
// A request payload is [u8 StoreOp] followed by the op's fields; strings and byte strings are
// [u32 length][bytes], lists of keys are [u32 count][string]..., numbers are i64:
//   SET key value            -> OK
//   GET key timeout_ms       -> OK value            | TIMEOUT [key]     (parked until key exists)
//   ADD key delta            -> OK i64              | INVALID message   (value not an integer)
//   COMPARE_SET key exp des  -> OK value-now-stored
//   DELETE key               -> OK u8 existed
//   CHECK keys               -> OK u8 all-present
//   WAIT keys timeout_ms     -> OK                  | TIMEOUT missing-keys (parked until all exist)
//   NUM_KEYS                 -> OK i64
// A reply payload is [u8 ReplyStatus] followed by the fields above. The server answers the
// requests of one connection in order; a parked GET/WAIT holds back later requests on it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/store.hpp"

namespace kolo::store_detail {

enum class StoreOp : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kDelete = 5,
  kCheck = 6,
  kWait = 7,
  kNumKeys = 8,
};

enum class ReplyStatus : uint8_t {
  kOk = 0,
  kTimeout = 1,          // followed by the keys still missing
  kInvalidArgument = 2,  // followed by a message
};

// Frames larger than this are refused as garbage (a store value is a rendezvous record, not data).
constexpr uint32_t kMaxFrameBytes = 256u << 20;
constexpr size_t kFrameHeaderBytes = 4;

// Keys under this prefix are the store's own bookkeeping (e.g. counting joined clients); the
// server leaves them out of num_keys().
inline constexpr const char* kInternalKeyPrefix = "__kolo_tcpstore__/";

const char* op_name(StoreOp op);

// Builds one frame; the length header is filled in by frame().
class WireWriter {
 public:
  WireWriter() : buf_(kFrameHeaderBytes, 0) {}
  WireWriter& u8(uint8_t v);
  WireWriter& i64(int64_t v);
  WireWriter& bytes(const uint8_t* data, size_t size);
  WireWriter& bytes(const Bytes& v) { return bytes(v.data(), v.size()); }
  WireWriter& str(const std::string& v) { return bytes(reinterpret_cast<const uint8_t*>(v.data()), v.size()); }
  WireWriter& strs(const std::vector<std::string>& v);
  // The finished frame, header included.
  const std::vector<uint8_t>& frame();

 private:
  void u32(uint32_t v);
  std::vector<uint8_t> buf_;
};

// Reads one payload (no header). Running off the end throws kolo::Error (a malformed message).
class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8();
  int64_t i64();
  Bytes bytes();
  std::string str();
  std::vector<std::string> strs();
  bool done() const { return p_ == end_; }

 private:
  uint32_t u32();
  void need(size_t n);
  const uint8_t* p_;
  const uint8_t* end_;
};

// Decodes the 4-byte length header at `p`.
uint32_t read_frame_length(const uint8_t* p);

}  // namespace kolo::store_detail
