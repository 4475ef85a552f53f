#include "transports/setup_failure.hpp"

#include <thread>

#include "kolo/error.hpp"
#include "kolo/store.hpp"

namespace kolo::transport {

namespace {
std::string failure_key(const Bootstrap& b) { return b.prefix + "/setup/failed"; }
std::string own_mark(const Bootstrap& b) { return "rank " + std::to_string(b.rank) + ": "; }
}  // namespace

void publish_setup_failure(const Bootstrap& b, const std::string& what) {
  try {
    const std::string text = own_mark(b) + what;
    b.store->compare_set(failure_key(b), {}, Bytes(text.begin(), text.end()));
  } catch (const std::exception&) {
    // The store is gone too; the peers will time out.
  }
}

std::optional<std::string> peer_setup_failure(const Bootstrap& b) {
  std::string text;
  try {
    if (!b.store->check({failure_key(b)})) return std::nullopt;
    text = b.store->get_string(failure_key(b));
  } catch (const std::exception& e) {
    throw PeerError("rank " + std::to_string(b.rank) + " lost the store while its transports were being set up: " + e.what(), -1);
  }
  if (text.rfind(own_mark(b), 0) == 0) return std::nullopt;  // our own, from an earlier transport
  return text;
}

void throw_if_peer_gave_up(const Bootstrap& b, const std::string& context) {
  std::optional<std::string> gave_up;
  try {
    gave_up = peer_setup_failure(b);
  } catch (const PeerError& e) {
    throw PeerError(e.what() + context, -1);
  }
  if (gave_up) throw PeerError("rank " + std::to_string(b.rank) + " stopped waiting for its peers: " + *gave_up, -1);
}

void acknowledge_setup_failure(const Bootstrap& b, std::chrono::milliseconds linger) {
  const auto until = std::chrono::steady_clock::now() + linger;
  try {
    const std::string key = b.prefix + "/setup/gave_up";
    if (b.store->add(key, 1) >= b.size) return;
    while (std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (b.store->add(key, 0) >= b.size) return;
    }
  } catch (const std::exception&) {
    // The store is gone: nobody can read from it any more anyway.
  }
}

}  // namespace kolo::transport
