#include "store/tcp_store_wire.hpp"

#include "kolo/error.hpp"

namespace kolo::store_detail {
namespace {

struct OpCode {
  StoreOp op;
  int legacy;     // -1: not in the dialect
  int validated;
};

// The two dialects' numbering (see the header).
constexpr OpCode kOpCodes[] = {
    {StoreOp::kValidate, -1, 0},    {StoreOp::kSet, 0, 1},          {StoreOp::kCompareSet, 1, 2},
    {StoreOp::kGet, 2, 3},          {StoreOp::kAdd, 3, 4},          {StoreOp::kCheck, 4, 5},
    {StoreOp::kWait, 5, 6},         {StoreOp::kNumKeys, 6, 7},      {StoreOp::kWatchKey, 7, -1},
    {StoreOp::kDeleteKey, 8, 8},    {StoreOp::kAppend, 9, 9},       {StoreOp::kMultiGet, 10, 10},
    {StoreOp::kMultiSet, 11, 11},   {StoreOp::kCancelWait, 12, 12}, {StoreOp::kPing, -1, 13},
    {StoreOp::kQueuePush, -1, 14},  {StoreOp::kQueuePop, -1, 15},   {StoreOp::kQueueLen, -1, 16},
};

int code_in(const OpCode& c, Dialect d) { return d == Dialect::kLegacy ? c.legacy : c.validated; }

}  // namespace

const char* op_name(StoreOp op) {
  switch (op) {
    case StoreOp::kValidate: return "validate";
    case StoreOp::kPing: return "ping";
    case StoreOp::kSet: return "set";
    case StoreOp::kCompareSet: return "compare_set";
    case StoreOp::kGet: return "get";
    case StoreOp::kAdd: return "add";
    case StoreOp::kCheck: return "check";
    case StoreOp::kWait: return "wait";
    case StoreOp::kNumKeys: return "num_keys";
    case StoreOp::kWatchKey: return "watch_key";
    case StoreOp::kDeleteKey: return "delete_key";
    case StoreOp::kAppend: return "append";
    case StoreOp::kMultiGet: return "multi_get";
    case StoreOp::kMultiSet: return "multi_set";
    case StoreOp::kCancelWait: return "cancel_wait";
    case StoreOp::kQueuePush: return "queue_push";
    case StoreOp::kQueuePop: return "queue_pop";
    case StoreOp::kQueueLen: return "queue_len";
  }
  return "unknown";
}

const char* dialect_name(Dialect d) { return d == Dialect::kLegacy ? "torch<=2.0" : "torch>=2.1"; }

std::optional<uint8_t> encode_op(StoreOp op, Dialect d) {
  for (const auto& c : kOpCodes) {
    if (c.op == op) return code_in(c, d) < 0 ? std::nullopt : std::optional<uint8_t>(uint8_t(code_in(c, d)));
  }
  return std::nullopt;
}

std::optional<StoreOp> decode_op(uint8_t code, Dialect d) {
  for (const auto& c : kOpCodes) {
    if (code_in(c, d) == int(code)) return c.op;
  }
  return std::nullopt;
}

void WireWriter::raw(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

WireWriter& WireWriter::op(StoreOp op, Dialect d) {
  auto code = encode_op(op, d);
  if (!code) {
    throw InvalidArgument(std::string("TCPStore: a ") + dialect_name(d) + " server has no '" + op_name(op) +
                          "' operation");
  }
  buf_.push_back(*code);
  return *this;
}

WireWriter& WireWriter::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

WireWriter& WireWriter::u32(uint32_t v) {
  raw(v, 4);
  return *this;
}

WireWriter& WireWriter::i64(int64_t v) {
  raw(static_cast<uint64_t>(v), 8);
  return *this;
}

WireWriter& WireWriter::key(const std::string& k) {
  if (k.size() > kMaxKeyBytes) {
    throw InvalidArgument("TCPStore: a key of " + std::to_string(k.size()) + " bytes exceeds the " +
                          std::to_string(kMaxKeyBytes) + "-byte limit");
  }
  raw(k.size(), 8);
  buf_.insert(buf_.end(), k.begin(), k.end());
  return *this;
}

WireWriter& WireWriter::value(const Bytes& v) {
  if (v.size() > kMaxValueBytes) {
    throw InvalidArgument("TCPStore: a value of " + std::to_string(v.size()) + " bytes exceeds the " +
                          std::to_string(kMaxValueBytes) + "-byte limit");
  }
  raw(v.size(), 8);
  buf_.insert(buf_.end(), v.begin(), v.end());
  return *this;
}

WireWriter& WireWriter::keys(const std::vector<std::string>& ks) {
  if (ks.size() > kMaxKeyCount) {
    throw InvalidArgument("TCPStore: " + std::to_string(ks.size()) + " keys in one request exceed the limit of " +
                          std::to_string(kMaxKeyCount));
  }
  raw(ks.size(), 8);
  for (const auto& k : ks) key(k);
  return *this;
}

void WireReader::need(uint64_t n) {
  if (static_cast<uint64_t>(end_ - p_) < n) throw NeedMore{};
}

uint8_t WireReader::u8() {
  need(1);
  return *p_++;
}

uint64_t WireReader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p_[i]) << (8 * i);
  p_ += 8;
  return v;
}

uint32_t WireReader::u32() {
  need(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p_[i]) << (8 * i);
  p_ += 4;
  return v;
}

int64_t WireReader::i64() { return static_cast<int64_t>(u64()); }

uint64_t WireReader::length(uint64_t cap, const char* what) {
  uint64_t n = u64();
  if (n > cap) {
    throw Error(std::string("TCPStore: ") + what + " of " + std::to_string(n) + " exceeds the limit of " +
                std::to_string(cap));
  }
  return n;
}

std::string WireReader::key() {
  uint64_t n = length(kMaxKeyBytes, "key length");
  need(n);
  std::string out(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return out;
}

Bytes WireReader::value() {
  uint64_t n = length(kMaxValueBytes, "value length");
  need(n);
  Bytes out(p_, p_ + n);
  p_ += n;
  return out;
}

std::vector<std::string> WireReader::keys() {
  uint64_t count = length(kMaxKeyCount, "key count");
  // Each key needs at least its 8-byte length: reserve nothing for keys that have not arrived.
  need(count * 8);
  std::vector<std::string> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(key());
  return out;
}

}  // namespace kolo::store_detail
