// make_hash_store(): a map behind one mutex. Waiters sleep on a condition variable that every
// mutation signals, so get()/wait() wake as soon as a key appears and never poll.
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "store/store_common.hpp"

namespace kolo {
namespace {

using store_detail::deadline_after;

class HashStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard lock(mu_);
      map_[key] = value;
    }
    changed_.notify_all();
  }

  Bytes get(const std::string& key) override {
    std::unique_lock lock(mu_);
    auto present = [&] { return map_.count(key) != 0; };
    if (!changed_.wait_until(lock, deadline_after(timeout_), present)) {
      store_detail::throw_wait_timeout("HashStore", {key}, timeout_);
    }
    return map_.at(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    {
      std::lock_guard lock(mu_);
      auto it = map_.find(key);
      int64_t current = it == map_.end() ? 0 : store_detail::parse_counter(key, it->second);
      result = store_detail::add_to_counter(key, current, delta);
      map_[key] = store_detail::format_counter(result);
    }
    changed_.notify_all();
    return result;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes now_stored;
    bool changed = false;
    {
      std::lock_guard lock(mu_);
      auto it = map_.find(key);
      std::optional<Bytes> current;
      if (it != map_.end()) current = it->second;
      if (auto to_store = store_detail::compare_set_decision(current, expected, desired)) {
        map_[key] = *to_store;
        now_stored = *to_store;
        changed = true;
      } else if (current) {
        now_stored = *current;
      }
    }
    if (changed) changed_.notify_all();
    return now_stored;
  }

  bool delete_key(const std::string& key) override {
    std::lock_guard lock(mu_);
    return map_.erase(key) != 0;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard lock(mu_);
    return missing_locked(keys).empty();
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    auto all_present = [&] { return missing_locked(keys).empty(); };
    if (!changed_.wait_until(lock, deadline_after(timeout), all_present)) {
      store_detail::throw_wait_timeout("HashStore", missing_locked(keys), timeout);
    }
  }

  int64_t num_keys() override {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(map_.size());
  }

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (map_.count(key) == 0) missing.push_back(key);
    }
    return missing;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace

std::shared_ptr<Store> make_hash_store() { return std::make_shared<HashStore>(); }

}  // namespace kolo
