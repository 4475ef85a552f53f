#include "engine/context.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kolo/error.hpp"

namespace kolo::engine {

Context::Context(int rank, int size)
    : rank_(rank), size_(size), by_peer_(static_cast<size_t>(size), nullptr), fixed_pairs_(static_cast<size_t>(size), nullptr) {
  wake_fd_ = transport::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
}

Context::~Context() = default;

void Context::add_device(std::unique_ptr<transport::Device> dev, const std::vector<int>& peers) {
  for (int p : peers) {
    by_peer_[static_cast<size_t>(p)] = dev.get();
    if (dev->pairs_fixed()) fixed_pairs_[static_cast<size_t>(p)] = dev->pair(p);
  }
  devices_.push_back(std::move(dev));
}

transport::Pair& Context::pair_of_device(int peer) const {
  transport::Device* d = by_peer_.at(static_cast<size_t>(peer));
  if (d == nullptr) throw Error("no transport reaches rank " + std::to_string(peer));
  transport::Pair* p = d->pair(peer);
  if (p == nullptr) throw Error("the connection to rank " + std::to_string(peer) + " went to the group's successor");
  return *p;
}

void Context::forget_pair(int peer) {
  const auto i = static_cast<size_t>(peer);
  if (i < fixed_pairs_.size()) fixed_pairs_[i] = nullptr;
}

const char* Context::transport_name(int peer) const {
  transport::Device* d = by_peer_.at(static_cast<size_t>(peer));
  return d ? d->name() : "self";
}

bool Context::all_peers_move_now() const {
  bool any = false;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const transport::Device* d = by_peer_.at(static_cast<size_t>(p));
    if (d == nullptr || !d->moves_now()) return false;
    any = true;
  }
  return any;
}

bool Context::poll() {
  bool moved = false;
  for (auto& d : devices_) moved |= d->poll();
  return moved;
}

void Context::block(std::chrono::microseconds max_wait, uint64_t key) {
  bool moved = false;
  for (auto& d : devices_) moved |= d->prepare_sleep();
  if (moved) return;  // something arrived while the devices armed: the caller polls again
  // Announce the sleep, then look at the event count: wake_sleeper() counts first and looks at
  // blocked_ second, so either it sees us (and writes the descriptor) or we see its count.
  blocked_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
  } leave{blocked_};
  if (key != kNoKey && wake_epoch_.load(std::memory_order_seq_cst) != key) return;
  pollfd fds[8];
  nfds_t n = 0;
  bool all_fds = true;
  for (auto& d : devices_) {
    int fd = d->wait_fd();
    if (fd < 0 || n == 7) {
      all_fds = false;
      continue;
    }
    fds[n++] = pollfd{fd, POLLIN, 0};
  }
  fds[n++] = pollfd{wake_fd_.get(), POLLIN, 0};
  int ms = static_cast<int>((max_wait.count() + 999) / 1000);
  if (!all_fds) ms = 0;  // a device without an fd must be polled: do not sleep
  ::poll(fds, n, ms);
  if (fds[n - 1].revents & POLLIN) {
    uint64_t v;
    ssize_t ignored = ::read(wake_fd_.get(), &v, sizeof v);
    (void)ignored;
  }
}

void Context::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
  (void)ignored;
}

void Context::peer_failed(int peer, transport::Failure why, const std::string& detail) {
  std::lock_guard<std::mutex> lk(failure_mu_);
  if (failed_.load()) return;
  failure_.peer = peer;
  failure_.why = why;
  failure_.detail = detail;
  if (why == transport::Failure::tag_mismatch || why == transport::Failure::size_mismatch) failure_.kind = ErrorKind::mismatch;
  if (why == transport::Failure::peer_aborted) {
    int culprit = -1;
    std::string message;
    decode_abort_reason(detail, &culprit, &failure_.kind, &message);
    failure_.peer = culprit >= 0 ? culprit : peer;
    failure_.detail = "rank " + std::to_string(peer) + " aborted: " + message;
  }
  failed_.store(true, std::memory_order_release);
}

PeerFailure Context::failure() const {
  std::lock_guard<std::mutex> lk(failure_mu_);
  return failure_;
}

void Context::abort(const std::string& reason) {
  if (aborted_) return;
  aborted_ = true;
  for (auto& d : devices_) d->abort(reason);
}

std::vector<int> Context::close(std::chrono::steady_clock::time_point deadline) {
  std::vector<int> missing;
  for (auto& d : devices_) {
    auto m = d->close(deadline);
    missing.insert(missing.end(), m.begin(), m.end());
  }
  return missing;
}

void Context::name_group(uint16_t id, const std::string& name) {
  std::lock_guard<std::mutex> lk(names_mu_);
  group_names_[id] = name;
}

std::string Context::group_name(uint16_t id) const {
  std::lock_guard<std::mutex> lk(names_mu_);
  auto it = group_names_.find(id);
  return it != group_names_.end() ? it->second : "with id " + std::to_string(id) + " (not known on this rank)";
}

std::string encode_abort_reason(int culprit, ErrorKind kind, const std::string& message) {
  return std::to_string(culprit) + "\n" + static_cast<char>(kind) + "\n" + message;
}

void decode_abort_reason(const std::string& reason, int* culprit, ErrorKind* kind, std::string* message) {
  // Anything not in the expected form is shown as it came.
  *message = reason;
  auto nl1 = reason.find('\n');
  if (nl1 == std::string::npos || nl1 + 2 >= reason.size() || reason[nl1 + 2] != '\n') return;
  try {
    *culprit = std::stoi(reason.substr(0, nl1));
  } catch (const std::exception&) {
    return;
  }
  char k = reason[nl1 + 1];
  if (k == 'T') *kind = ErrorKind::timeout;
  else if (k == 'M') *kind = ErrorKind::mismatch;
  else *kind = ErrorKind::peer;
  *message = reason.substr(nl1 + 3);
}

}  // namespace kolo::engine
