#include "store/tcp_store_wire.hpp"

#include "kolo/error.hpp"

namespace kolo::store_detail {

const char* op_name(StoreOp op) {
  switch (op) {
    case StoreOp::kSet: return "set";
    case StoreOp::kGet: return "get";
    case StoreOp::kAdd: return "add";
    case StoreOp::kCompareSet: return "compare_set";
    case StoreOp::kDelete: return "delete_key";
    case StoreOp::kCheck: return "check";
    case StoreOp::kWait: return "wait";
    case StoreOp::kNumKeys: return "num_keys";
  }
  return "unknown";
}

WireWriter& WireWriter::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

void WireWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

WireWriter& WireWriter::i64(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(u >> (8 * i)));
  return *this;
}

WireWriter& WireWriter::bytes(const uint8_t* data, size_t size) {
  if (size > kMaxFrameBytes) {
    throw InvalidArgument("TCPStore: a key or value of " + std::to_string(size) + " bytes exceeds the " +
                          std::to_string(kMaxFrameBytes) + "-byte message limit");
  }
  u32(static_cast<uint32_t>(size));
  buf_.insert(buf_.end(), data, data + size);
  return *this;
}

WireWriter& WireWriter::strs(const std::vector<std::string>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) str(s);
  return *this;
}

const std::vector<uint8_t>& WireWriter::frame() {
  size_t payload = buf_.size() - kFrameHeaderBytes;
  if (payload > kMaxFrameBytes) {
    throw InvalidArgument("TCPStore: a request of " + std::to_string(payload) + " bytes exceeds the " +
                          std::to_string(kMaxFrameBytes) + "-byte message limit");
  }
  for (int i = 0; i < 4; ++i) buf_[i] = static_cast<uint8_t>(payload >> (8 * i));
  return buf_;
}

void WireReader::need(size_t n) {
  if (static_cast<size_t>(end_ - p_) < n) throw Error("TCPStore: malformed message (truncated field)");
}

uint8_t WireReader::u8() {
  need(1);
  return *p_++;
}

uint32_t WireReader::u32() {
  need(4);
  uint32_t v = read_frame_length(p_);
  p_ += 4;
  return v;
}

int64_t WireReader::i64() {
  need(8);
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= uint64_t(p_[i]) << (8 * i);
  p_ += 8;
  return static_cast<int64_t>(u);
}

Bytes WireReader::bytes() {
  uint32_t n = u32();
  need(n);
  Bytes out(p_, p_ + n);
  p_ += n;
  return out;
}

std::string WireReader::str() {
  uint32_t n = u32();
  need(n);
  std::string out(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return out;
}

std::vector<std::string> WireReader::strs() {
  uint32_t count = u32();
  // Each string needs at least its 4-byte length, so a count beyond that is garbage.
  if (count > static_cast<size_t>(end_ - p_) / 4) throw Error("TCPStore: malformed message (bad key count)");
  std::vector<std::string> out;
  out.reserve(count);
  for (uint32_t i = 0; i < count; ++i) out.push_back(str());
  return out;
}

uint32_t read_frame_length(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

}  // namespace kolo::store_detail
