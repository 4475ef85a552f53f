// Making a group that owns its connections (connect_impl) or shares its parent's (share_impl).
#include <algorithm>

#include "common/config.hpp"
#include "common/crypto.hpp"
#include "engine/group_impl.hpp"

namespace kolo {

using Clock = std::chrono::steady_clock;

std::string next_prefix(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, int> counts;
  std::lock_guard<std::mutex> lk(mu);
  return "kolo/" + name + "/" + std::to_string(counts[name]++);
}

std::shared_ptr<ProcessGroup> make_group(std::unique_ptr<ProcessGroup::Impl> impl) {
  return std::make_shared<ProcessGroup>(std::move(impl));
}

// "group-" and 12 hex digits of SHA-256(secret, prefix): every rank of a group agreed on both,
// and another job has another secret; the secret itself cannot be read back from it.
static std::string job_tag(const engine::Secret& secret, const std::string& prefix) {
  const auto d = crypto::sha256(std::string(secret.begin(), secret.end()) + prefix);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "group-";
  for (size_t i = 0; i < 6; ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  return out;
}

// What every group starts as, whether it connects or shares its parent's connections: its own
// root of a line (generation 0), and no message numbered yet.
static std::unique_ptr<ProcessGroup::Impl> new_impl(std::shared_ptr<Store> store, const std::string& prefix,
                                                    const std::string& name, int rank, int size,
                                                    std::chrono::milliseconds timeout, const std::string& transport) {
  auto impl = std::make_unique<ProcessGroup::Impl>();
  impl->store = std::move(store);
  impl->prefix = prefix;
  impl->name = name;
  impl->root_prefix = prefix;
  impl->root_name = name;
  impl->rank = rank;
  impl->size = size;
  impl->timeout = timeout;
  impl->transport = transport;
  impl->send_seq.assign(static_cast<size_t>(size), 0);
  impl->recv_seq.assign(static_cast<size_t>(size), 0);
  return impl;
}

// The ranks' host identities, and the layout algorithms see (one host when they are unknown).
static void set_hosts(ProcessGroup::Impl& impl, std::vector<std::string> host_ids) {
  impl.host_ids = std::move(host_ids);
  impl.hosts = impl.host_ids.size() == static_cast<size_t>(impl.size) ? algo::HostLayout::from_ids(impl.host_ids)
                                                                      : algo::HostLayout::single_host(impl.size);
}

std::unique_ptr<ProcessGroup::Impl> connect_impl(std::shared_ptr<Store> store, const std::string& prefix,
                                                         const std::string& name, int rank, int size,
                                                         std::chrono::milliseconds timeout, const engine::Secret* secret,
                                                         const std::string& secret_text, const std::string& transport,
                                                         std::chrono::milliseconds connect_timeout, const engine::Reuse* reuse) {
  auto impl = new_impl(store, prefix, name, rank, size, timeout, transport);
  impl->secret = secret ? *secret : engine::agree_secret(*store, prefix, rank, secret_text);
  const auto connect_for = connect_timeout.count() > 0 ? connect_timeout : timeout;
  auto connected =
      engine::connect_group(*store, prefix, rank, size, impl->secret, Clock::now() + connect_for, transport, reuse);
  impl->carried = connected.carried;
  set_hosts(*impl, connected.host_ids);
  engine::GroupInfo info;
  info.name = name;
  info.rank = rank;
  info.size = size;
  info.hosts = impl->hosts;
  info.blame = engine::BlameBoard::from_config(store, prefix, rank, size);
  info.job = job_tag(impl->secret, prefix);
  impl->executor = std::make_shared<engine::Executor>(std::move(connected.ctx), std::move(info), timeout);
  impl->executor->name_group(0, name);
  impl->connections = std::make_shared<SharedConnections>(impl->executor);
  std::weak_ptr<engine::Executor> executor = impl->executor;
  impl->device.direct.configure(store, prefix, rank, size, impl->hosts.num_hosts() == 1, true, timeout, [executor] {
    auto e = executor.lock();
    return !e || e->failed() ? std::string("the group has failed (a peer died or aborted: its next call says which)")
                             : std::string();
  });
  return impl;
}

// A subgroup that runs on `parent`'s connections and executor: no connection, no thread, no
// store traffic (the blame board's keys are written only after a timeout).
std::unique_ptr<ProcessGroup::Impl> share_impl(const ProcessGroup::Impl& parent, const std::string& prefix,
                                                       const std::string& name, int rank,
                                                       const std::vector<int>& parent_ranks,
                                                       std::chrono::milliseconds timeout) {
  const int size = static_cast<int>(parent_ranks.size());
  auto impl = new_impl(parent.store, prefix, name, rank, size, timeout, parent.transport);
  impl->secret = parent.secret;
  std::vector<std::string> host_ids;
  if (parent.host_ids.size() == static_cast<size_t>(parent.size))
    for (int r : parent_ranks) host_ids.push_back(parent.host_ids[static_cast<size_t>(r)]);
  set_hosts(*impl, std::move(host_ids));
  impl->executor = parent.executor;
  impl->connections = parent.connections;
  const engine::GroupInfo& owner = parent.executor->group();
  const engine::GroupInfo& above = parent.shared ? *parent.shared : owner;
  impl->shared = engine::make_shared_group(above, owner.size, name, prefix, rank, parent_ranks, impl->hosts,
                                           engine::BlameBoard::from_config(parent.store, prefix, rank, size));
  impl->executor->name_group(impl->shared->id, name);
  return impl;
}

}  // namespace kolo
