// make_file_store(): processes on one host (or sharing an NFS path) rendezvous through a file.
//
// The file is an append-only log, like c10d's FileStore. Each record is
//   [u8 op][u32 key length][u32 value length][key][value]   (lengths little-endian)
// with op SET (key := value), DELETE (key removed) or FINISHED (one user destroyed its store).
// Every store object replays the log into a private map, reading only the records added since
// its last look. Mutations hold an exclusive flock() while they replay the log and append their
// record, which is what makes add(), compare_set() and delete_key() atomic across processes;
// reads hold a shared flock() so they never see a half-written record. get()/wait() poll the
// file with short sleeps (1 ms growing to 10 ms) until the keys appear or the timeout passes.
//
// Clean-up: with world_size > 0 every destroyed store object appends a FINISHED record, and the
// object that brings their number to world_size deletes the file. With world_size <= 0 the file
// is left in place for its creator to remove. A process that dies without destroying its store
// leaves the file behind; reusing a path with an old log replays its old keys, so use a fresh
// path per job.
//
// A store object copied into a child by fork() reopens the file on first use (flock belongs to
// the open file description, which parent and child would otherwise share) and does not count
// as a user when the child destroys it.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "kolo/error.hpp"
#include "store/store_common.hpp"

namespace kolo {
namespace {

enum class RecordOp : uint8_t { kSet = 1, kDelete = 2, kFinished = 3 };
constexpr size_t kRecordHeaderBytes = 1 + 4 + 4;

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

std::string errno_text(int err) { return std::strerror(err); }

class FileStore final : public Store {
 public:
  FileStore(std::string path, int world_size)
      : path_(std::move(path)), world_size_(world_size), creator_pid_(::getpid()) {
    open_file();
  }

  ~FileStore() override {
    std::lock_guard guard(mu_);
    if (fd_ < 0) return;
    if (creator_pid_ == ::getpid()) {
      try {
        record_finished_and_maybe_remove();
      } catch (const std::exception&) {
        // A destructor cannot report; the worst outcome is a file left behind.
      }
    }
    ::close(fd_);
  }

  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_EX);
    append(RecordOp::kSet, key, value);
  }

  Bytes get(const std::string& key) override {
    std::optional<Bytes> value;
    poll_until([&] {
      value = lookup(key);
      return value.has_value();
    }, {key}, timeout_);
    return *value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_EX);
    auto it = map_.find(key);
    int64_t current = it == map_.end() ? 0 : store_detail::parse_counter(key, it->second);
    int64_t result = store_detail::add_to_counter(key, current, delta);
    append(RecordOp::kSet, key, store_detail::format_counter(result));
    return result;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_EX);
    auto it = map_.find(key);
    std::optional<Bytes> current;
    if (it != map_.end()) current = it->second;
    if (auto to_store = store_detail::compare_set_decision(current, expected, desired)) {
      append(RecordOp::kSet, key, *to_store);
      return *to_store;
    }
    return current ? *current : Bytes{};
  }

  bool delete_key(const std::string& key) override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_EX);
    if (map_.count(key) == 0) return false;
    append(RecordOp::kDelete, key, {});
    return true;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_SH);
    return missing_locked(keys).empty();
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    poll_until([&] { return check(keys); }, keys, timeout);
  }

  int64_t num_keys() override {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_SH);
    return static_cast<int64_t>(map_.size());
  }

 private:
  // Holds flock() on the file and brings map_ up to date with the log. Caller holds mu_.
  class FileLock {
   public:
    FileLock(FileStore& store, int mode) : store_(store) {
      store_.reopen_if_forked();
      while (::flock(store_.fd_, mode) != 0) {
        if (errno != EINTR) throw Error("FileStore: cannot lock " + store_.path_ + ": " + errno_text(errno));
      }
      try {
        store_.replay_new_records();
      } catch (...) {
        ::flock(store_.fd_, LOCK_UN);
        throw;
      }
    }
    ~FileLock() { ::flock(store_.fd_, LOCK_UN); }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

   private:
    FileStore& store_;
  };

  void open_file() {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("FileStore: cannot open " + path_ + ": " + errno_text(errno));
    owner_pid_ = ::getpid();
  }

  void reopen_if_forked() {
    if (owner_pid_ == ::getpid()) return;
    // Our map_ and read offset stay valid: the log is append-only, we just need our own lock.
    ::close(fd_);
    fd_ = -1;
    open_file();
  }

  // Reads the records appended since the last call and applies them to map_.
  void replay_new_records() {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw Error("FileStore: cannot stat " + path_ + ": " + errno_text(errno));
    if (st.st_size <= read_offset_) return;
    std::vector<uint8_t> chunk(static_cast<size_t>(st.st_size - read_offset_));
    size_t got = 0;
    while (got < chunk.size()) {
      ssize_t n = ::pread(fd_, chunk.data() + got, chunk.size() - got, read_offset_ + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error("FileStore: cannot read " + path_ + ": " + errno_text(errno));
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    size_t pos = 0;
    while (got - pos >= kRecordHeaderBytes) {
      const uint8_t* header = chunk.data() + pos;
      size_t key_len = get_u32(header + 1);
      size_t value_len = get_u32(header + 5);
      size_t record_len = kRecordHeaderBytes + key_len + value_len;
      if (got - pos < record_len) break;  // cannot happen under the lock, but never read past it
      std::string key(reinterpret_cast<const char*>(header + kRecordHeaderBytes), key_len);
      const uint8_t* value = header + kRecordHeaderBytes + key_len;
      switch (static_cast<RecordOp>(header[0])) {
        case RecordOp::kSet: map_[key] = Bytes(value, value + value_len); break;
        case RecordOp::kDelete: map_.erase(key); break;
        case RecordOp::kFinished: ++finished_users_; break;
        default: throw Error("FileStore: " + path_ + " is corrupt (unknown record type " +
                             std::to_string(header[0]) + ")");
      }
      pos += record_len;
    }
    read_offset_ += static_cast<off_t>(pos);
  }

  // Appends one record with a single write() and replays it. Caller holds the exclusive lock.
  void append(RecordOp op, const std::string& key, const Bytes& value) {
    std::vector<uint8_t> record;
    record.reserve(kRecordHeaderBytes + key.size() + value.size());
    record.push_back(static_cast<uint8_t>(op));
    put_u32(record, static_cast<uint32_t>(key.size()));
    put_u32(record, static_cast<uint32_t>(value.size()));
    record.insert(record.end(), key.begin(), key.end());
    record.insert(record.end(), value.begin(), value.end());
    size_t written = 0;
    while (written < record.size()) {
      ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error("FileStore: cannot write " + path_ + ": " + errno_text(errno));
      written += static_cast<size_t>(n);
    }
    replay_new_records();
  }

  void record_finished_and_maybe_remove() {
    FileLock lock(*this, LOCK_EX);
    append(RecordOp::kFinished, {}, {});
    // Unlinking under the lock: a user still polling holds its own descriptor and is unaffected.
    if (world_size_ > 0 && finished_users_ >= world_size_) ::unlink(path_.c_str());
  }

  std::optional<Bytes> lookup(const std::string& key) {
    std::lock_guard guard(mu_);
    FileLock lock(*this, LOCK_SH);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (map_.count(key) == 0) missing.push_back(key);
    }
    return missing;
  }

  // Re-checks `ready` with growing sleeps (the file has no way to notify us) until the deadline.
  template <typename Ready>
  void poll_until(Ready ready, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    auto deadline = store_detail::deadline_after(timeout);
    auto pause = std::chrono::milliseconds(1);
    while (!ready()) {
      auto left = store_detail::remaining(deadline);
      if (left.count() == 0) {
        std::vector<std::string> missing;
        {
          std::lock_guard guard(mu_);
          FileLock lock(*this, LOCK_SH);
          missing = missing_locked(keys);
        }
        if (missing.empty()) continue;  // appeared at the last moment: ready() will say so
        store_detail::throw_wait_timeout("FileStore(" + path_ + ")", missing, timeout);
      }
      std::this_thread::sleep_for(std::min(pause, left));
      pause = std::min(pause * 2, std::chrono::milliseconds(10));
    }
  }

  std::mutex mu_;  // this object's threads share fd_, and flock() cannot tell them apart
  std::string path_;
  int world_size_;
  int fd_ = -1;
  pid_t creator_pid_;   // only the process that made this object counts as a user
  pid_t owner_pid_ = 0;  // the process fd_ was opened in
  off_t read_offset_ = 0;
  int64_t finished_users_ = 0;
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& path, int world_size) {
  if (path.empty()) throw InvalidArgument("make_file_store: path is empty");
  return std::make_shared<FileStore>(path, world_size);
}

}  // namespace kolo
