#include "store/tcp_store_state.hpp"

#include <optional>

#include "kolo/error.hpp"
#include "store/store_common.hpp"

namespace kolo::store_detail {

size_t StoreState::serve(ConnId id, Hello& hello, const uint8_t* in, size_t size, std::vector<uint8_t>& out) {
  size_t pos = 0;
  if (hello == Hello::kUnknown && !read_hello(hello, in, size, pos)) return 0;
  const Dialect dialect = hello == Hello::kValidated ? Dialect::kValidated : Dialect::kLegacy;
  while (pos < size) {
    WireReader r(in + pos, size - pos);
    WireWriter w;
    try {
      uint8_t code = r.u8();
      auto op = decode_op(code, dialect);
      if (!op || *op == StoreOp::kWatchKey) {
        throw Error("unknown or unsupported request code " + std::to_string(code) + " (" + dialect_name(dialect) +
                    " numbering)");
      }
      serve_request(id, *op, r, w);
    } catch (const WireReader::NeedMore&) {
      break;  // every field is read before anything changes, so nothing happened
    }
    ++requests_;
    out.insert(out.end(), w.bytes().begin(), w.bytes().end());
    pos += r.consumed();
  }
  return pos;
}

// Tells the dialect from a connection's first bytes. VALIDATE (0) + magic opens a torch >= 2.1
// connection; anything else is a legacy request (a legacy SET is also 0, but its u64 key length
// would need the magic in its low half: a 1 GiB key, which no client sends). False while too
// few bytes have arrived to tell.
bool StoreState::read_hello(Hello& hello, const uint8_t* in, size_t size, size_t& pos) {
  if (size == 0) return false;
  if (in[0] != 0) {
    hello = Hello::kLegacy;
    return true;
  }
  if (size < 5) return false;
  WireReader r(in + 1, 4);
  if (r.u32() == kValidationMagic) {
    hello = Hello::kValidated;
    pos = 5;
  } else {
    hello = Hello::kLegacy;
  }
  return true;
}

void StoreState::forget(ConnId id) {
  if (parked_.count(id)) unpark(id);
}

std::vector<StoreState::ConnId> StoreState::take_woken() {
  std::vector<ConnId> out;
  out.swap(woken_);
  return out;
}

// Reads op's fields (all of them before changing anything, so that NeedMore leaves no trace)
// and writes its reply into w.
void StoreState::serve_request(ConnId fd, StoreOp op, WireReader& r, WireWriter& w) {
  switch (op) {
    case StoreOp::kValidate:
      if (r.u32() != kValidationMagic) throw Error("VALIDATE with a wrong magic number");
      return;
    case StoreOp::kPing:
      w.u32(r.u32());
      return;
    case StoreOp::kSet: {
      std::string key = r.key();
      Bytes value = r.value();
      data_[key] = std::move(value);
      return key_changed(key);
    }
    case StoreOp::kCompareSet: {
      std::string key = r.key();
      Bytes expected = r.value();
      Bytes desired = r.value();
      auto it = data_.find(key);
      std::optional<Bytes> current;
      if (it != data_.end()) current = it->second;
      if (auto to_store = compare_set_decision(current, expected, desired)) {
        data_[key] = *to_store;
        w.value(*to_store);
        return key_changed(key);
      }
      w.value(current ? *current : Bytes{});
      return;
    }
    case StoreOp::kGet: {
      std::string key = r.key();
      auto it = data_.find(key);
      w.value(it == data_.end() ? Bytes{} : it->second);  // as c10d's libuv server: clients WAIT first
      return;
    }
    case StoreOp::kAdd: {
      std::string key = r.key();
      int64_t delta = r.i64();
      auto it = data_.find(key);
      // A non-integer value, or an overflow, throws InvalidArgument and ends the connection (c10d
      // has no error reply).
      int64_t value = add_to_counter(key, it == data_.end() ? 0 : parse_counter(key, it->second), delta);
      data_[key] = format_counter(value);
      w.i64(value);
      return key_changed(key);
    }
    case StoreOp::kCheck: {
      auto keys = r.keys();
      w.u8(missing(keys).empty() ? kCheckReady : kCheckNotReady);
      return;
    }
    case StoreOp::kWait: {
      auto keys = r.keys();
      if (missing(keys).empty()) {
        w.u8(kStopWaiting);
        return;
      }
      return park(fd, std::move(keys));
    }
    case StoreOp::kCancelWait:
      if (parked_.count(fd)) unpark(fd);
      w.u8(kWaitCanceled);
      return;
    case StoreOp::kNumKeys:
      w.i64(static_cast<int64_t>(data_.size()));
      return;
    case StoreOp::kDeleteKey:
      w.i64(static_cast<int64_t>(data_.erase(r.key())));
      return;
    case StoreOp::kAppend: {
      std::string key = r.key();
      Bytes value = r.value();
      Bytes& stored = data_[key];
      if (stored.size() + value.size() > kMaxValueBytes) throw Error("APPEND beyond the value size limit");
      stored.insert(stored.end(), value.begin(), value.end());
      return key_changed(key);
    }
    case StoreOp::kMultiGet: {
      for (const auto& key : r.keys()) {
        auto it = data_.find(key);
        w.value(it == data_.end() ? Bytes{} : it->second);
      }
      return;
    }
    case StoreOp::kMultiSet: {
      uint64_t count = r.u64();
      if (count > kMaxKeyCount) throw Error("MULTI_SET of " + std::to_string(count) + " keys");
      std::vector<std::pair<std::string, Bytes>> pairs;
      for (uint64_t i = 0; i < count; ++i) {
        std::string key = r.key();
        pairs.emplace_back(std::move(key), r.value());
      }
      for (auto& [key, value] : pairs) {
        data_[key] = std::move(value);
        key_changed(key);
      }
      return;
    }
    case StoreOp::kQueuePush: {
      std::string key = r.key();
      queues_[key].push_back(r.value());
      return key_changed(key);
    }
    case StoreOp::kQueuePop: {
      auto it = queues_.find(r.key());
      w.i64(it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
      if (it != queues_.end() && !it->second.empty()) {
        w.value(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) queues_.erase(it);
      }
      return;
    }
    case StoreOp::kQueueLen: {
      auto it = queues_.find(r.key());
      w.i64(it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size()));
      return;
    }
    case StoreOp::kWatchKey: break;
  }
  throw Error(std::string("unsupported request ") + op_name(op));
}


// A key "exists" for CHECK and WAIT when it holds a value or a non-empty queue (as in c10d).
bool StoreState::present(const std::string& key) const {
  if (data_.count(key)) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

std::vector<std::string> StoreState::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& key : keys) {
    if (!present(key)) out.push_back(key);
  }
  return out;
}

// One WAIT per connection: a new one replaces a WAIT its client abandoned (torch 1.13), so
// that no late STOP_WAITING answers a later request.
void StoreState::park(ConnId fd, std::vector<std::string> keys) {
  if (parked_.count(fd)) unpark(fd);
  for (const auto& key : missing(keys)) waiting_on_[key].insert(fd);
  parked_[fd] = std::move(keys);
}

void StoreState::unpark(ConnId fd) {
  auto it = parked_.find(fd);
  for (const auto& key : it->second) {
    auto w = waiting_on_.find(key);
    if (w == waiting_on_.end()) continue;
    w->second.erase(fd);
    if (w->second.empty()) waiting_on_.erase(w);
  }
  parked_.erase(it);
}

// A key was created or changed: answer the parked WAITs it completes.
void StoreState::key_changed(const std::string& key) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  std::unordered_set<ConnId> fds = std::move(it->second);
  waiting_on_.erase(it);
  for (int fd : fds) try_complete(fd);
}

void StoreState::try_complete(ConnId fd) {
  auto it = parked_.find(fd);
  if (it == parked_.end()) return;
  auto still_missing = missing(it->second);
  if (!still_missing.empty()) {
    // Keys may have been deleted since the WAIT was parked; watch whatever is missing now.
    for (const auto& key : still_missing) waiting_on_[key].insert(fd);
    return;
  }
  unpark(fd);
  woken_.push_back(fd);
}


}  // namespace kolo::store_detail
