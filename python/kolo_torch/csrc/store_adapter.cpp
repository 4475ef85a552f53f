// c10d stores report a timeout as c10::Error (a RuntimeError in Python); kolo's setup code tells
// a timed-out wait apart from other failures, so waits rethrow as kolo::TimeoutError.
#include "store_adapter.hpp"

#include "kolo/error.hpp"

namespace kolo_torch {
namespace {

std::string first_line(const char* what) {
  std::string s(what);
  auto nl = s.find('\n');  // c10::Error appends a C++ backtrace after the first line
  return nl == std::string::npos ? s : s.substr(0, nl);
}

class C10dStoreAdapter final : public kolo::Store {
 public:
  explicit C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> s) : s_(std::move(s)) { timeout_ = s_->getTimeout(); }

  void set(const std::string& key, const kolo::Bytes& value) override { s_->set(key, value); }

  kolo::Bytes get(const std::string& key) override {
    wait({key}, timeout_);  // bounded by kolo's timeout, not the c10d store's own
    return s_->get(key);
  }

  int64_t add(const std::string& key, int64_t delta) override { return s_->add(key, delta); }

  kolo::Bytes compare_set(const std::string& key, const kolo::Bytes& expected, const kolo::Bytes& desired) override {
    return s_->compareSet(key, expected, desired);
  }

  bool delete_key(const std::string& key) override { return s_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return s_->check(keys); }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    try {
      s_->wait(keys, timeout);
    } catch (const std::exception& e) {
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
      throw kolo::TimeoutError("kolo: c10d store wait for [" + names + "] failed after " +
                               std::to_string(timeout.count()) + " ms: " + first_line(e.what()));
    }
  }

  int64_t num_keys() override { return s_->getNumKeys(); }

 private:
  c10::intrusive_ptr<c10d::Store> s_;
};

}  // namespace

std::shared_ptr<kolo::Store> adapt_store(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStoreAdapter>(std::move(store));
}

}  // namespace kolo_torch
