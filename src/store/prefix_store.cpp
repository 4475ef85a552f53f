// make_prefix_store(): namespaces keys as "<prefix>/<key>" so subgroups can share one store
// without their keys colliding. Everything else is forwarded to the base store.
#include "kolo/error.hpp"
#include "store/store_common.hpp"

namespace kolo {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base) : prefix_(std::move(prefix)), base_(std::move(base)) {
    // Start with the base's patience; set_timeout() on the prefix store changes only its own.
    timeout_ = base_->timeout();
  }

  void set(const std::string& key, const Bytes& value) override { base_->set(full(key), value); }

  Bytes get(const std::string& key) override {
    // The base's get() waits with the base's timeout; ours may differ, so wait with ours first.
    const std::string k = full(key);
    base_->wait({k}, timeout_);
    return base_->get(k);
  }

  int64_t add(const std::string& key, int64_t delta) override { return base_->add(full(key), delta); }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return base_->compare_set(full(key), expected, desired);
  }

  bool delete_key(const std::string& key) override { return base_->delete_key(full(key)); }

  bool check(const std::vector<std::string>& keys) override { return base_->check(full(keys)); }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    base_->wait(full(keys), timeout);
  }

  // Like c10d's PrefixStore: the base cannot count one namespace cheaply, so this is the number
  // of keys in the whole base store.
  int64_t num_keys() override { return base_->num_keys(); }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& key : keys) out.push_back(full(key));
    return out;
  }

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace

std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> base) {
  if (!base) throw InvalidArgument("make_prefix_store: base store is null (prefix '" + prefix + "')");
  return std::make_shared<PrefixStore>(prefix, std::move(base));
}

}  // namespace kolo
