#include "engine/blame.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/config.hpp"
#include "common/log.hpp"

namespace kolo::engine {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string encode_wait(const WaitFor& w) {
  return (w.collective ? "c" : "p") + std::to_string(w.seq) + " " + std::to_string(w.peer);
}

std::optional<WaitFor> decode_wait(const std::string& text) {
  if (text.size() < 4 || (text[0] != 'c' && text[0] != 'p')) return std::nullopt;
  const size_t space = text.find(' ');
  if (space == std::string::npos || space < 2 || space + 1 >= text.size()) return std::nullopt;
  const std::string seq = text.substr(1, space - 1), peer = text.substr(space + 1);
  auto digits = [](const std::string& s) { return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos; };
  if (!digits(seq) || !digits(peer) || peer.size() > 9) return std::nullopt;
  WaitFor w;
  w.collective = text[0] == 'c';
  w.seq = std::stoull(seq);
  w.peer = std::stoi(peer);
  return w;
}

BlameBoard::BlameBoard(std::shared_ptr<Store> store, std::string prefix, int rank, int size, milliseconds grace)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size), grace_(std::max(grace, milliseconds(0))) {}

std::shared_ptr<const BlameBoard> BlameBoard::from_config(std::shared_ptr<Store> store, std::string prefix, int rank,
                                                          int size) {
  return std::make_shared<const BlameBoard>(std::move(store), std::move(prefix), rank, size,
                                            milliseconds(config::get_int("KOLO_BLAME_GRACE")));
}

std::string BlameBoard::key(int rank) const { return prefix_ + "/blame/" + std::to_string(rank); }

milliseconds BlameBoard::grace(milliseconds timeout) const { return std::min(grace_, timeout / 2); }

namespace {

// Whether `next` (what the rank at the chain's end says it waits for) continues a chain that
// reached that rank through `at`. A rank waited for in collective #k has not finished #k, so an
// entry for a later collective is not about this chain (it would be a stale or foreign key).
bool continues(const WaitFor& at, const WaitFor& next) { return !(at.collective && next.collective) || next.seq <= at.seq; }

// Shared by the caller and the helper thread, which may outlive the caller's wait. The helper
// keeps `chain` current as it follows, so that a store that fails or stops answering midway
// still leaves what was learnt: the rank at its end had not reported by then.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool published = false;     // this rank's entry is in the store (a read since answered): `chain` counts
  Blame chain;                // followed so far
  std::optional<Blame> blame; // the verdict, once done
  std::string why;            // done without a verdict, or a verdict from a cut-short chain: why

  void follow(const Blame& b) {
    std::lock_guard<std::mutex> lk(mu);
    published = true;
    chain = b;
  }
};

// The helper thread's work: publish, then follow entries until a rank has published nothing by
// `deadline`. Empty (with `why`) when the chain loops or an entry does not continue it.
std::optional<Blame> publish_and_follow(Store& store, const BlameBoard& board, int rank, int size, const WaitFor& w,
                                        Clock::time_point deadline, Exchange& ex, std::string* why) {
  store.set(board.key(rank), encode_wait(w));
  Blame b{{w.peer}};
  // A TCPStore's SET has no reply (it may sit in a socket buffer towards a frozen store), so only
  // an answered read proves that the store works: the chain counts from then on.
  bool answered = false;
  std::vector<bool> seen(static_cast<size_t>(size), false);
  seen[static_cast<size_t>(rank)] = seen[static_cast<size_t>(w.peer)] = true;
  WaitFor at = w;  // the wait that led to chain.back()
  // Timed-out ranks publish within milliseconds of one another when they stopped together; a
  // short pause growing to 20 ms finds them fast without hammering the store for the grace.
  milliseconds pause(1);
  for (;;) {
    const std::string k = board.key(b.culprit());
    const bool reported = store.check({k});
    if (!answered) ex.follow(b);
    answered = true;
    if (reported) {
      const std::optional<WaitFor> next = decode_wait(store.get_string(k));
      if (!next || next->peer < 0 || next->peer >= size || !continues(at, *next)) {
        *why = "rank " + std::to_string(b.culprit()) + "'s entry does not continue the chain";
        return std::nullopt;
      }
      if (seen[static_cast<size_t>(next->peer)]) {
        *why = "the chain loops back to rank " + std::to_string(next->peer);
        return std::nullopt;
      }
      seen[static_cast<size_t>(next->peer)] = true;
      b.chain.push_back(next->peer);
      ex.follow(b);
      at = *next;
      pause = milliseconds(1);
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) return b;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, milliseconds(20));
  }
}

}  // namespace

std::optional<Blame> BlameBoard::settle(const WaitFor& w, milliseconds timeout) const {
  const milliseconds grace = this->grace(timeout);
  if (grace.count() <= 0 || w.peer < 0 || w.peer >= size_ || w.peer == rank_) return std::nullopt;
  const auto deadline = Clock::now() + grace;
  auto ex = std::make_shared<Exchange>();
  // Copies only: a store that answers after the caller gave up finds everything it touches alive.
  auto board = std::make_shared<const BlameBoard>(*this);
  try {
    std::thread([board, ex, w, deadline] {
      std::optional<Blame> blame;
      std::string why;
      bool store_failed = false;
      try {
        blame = publish_and_follow(*board->store_, *board, board->rank_, board->size_, w, deadline, *ex, &why);
      } catch (const std::exception& e) {
        // The store may have gone with a rank that already raised (rank 0 hosts init_from_env's).
        why = std::string("the store failed: ") + e.what();
        store_failed = true;
      }
      std::lock_guard<std::mutex> lk(ex->mu);
      if (store_failed && ex->published) blame = ex->chain;
      ex->blame = std::move(blame);
      ex->why = std::move(why);
      ex->done = true;
      ex->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    KOLO_LOG(warn, "blame chain skipped: no helper thread: " << e.what());
    return std::nullopt;
  }
  // The helper stops following at the deadline; its last store call may still be in flight.
  constexpr milliseconds kLastAnswer(100);
  std::unique_lock<std::mutex> lk(ex->mu);
  if (!ex->cv.wait_until(lk, deadline + kLastAnswer, [&] { return ex->done; })) {
    if (ex->published) {
      KOLO_LOG(warn, "blame chain cut short: the store stopped answering; blaming the end of the chain so far");
      return ex->chain;
    }
    KOLO_LOG(warn, "blame chain skipped: the store did not answer within " << grace.count() + kLastAnswer.count()
                                                                          << " ms; naming the rank waited for");
    return std::nullopt;
  }
  if (!ex->blame) {
    KOLO_LOG(warn, "blame chain skipped: " << ex->why << "; naming the rank waited for");
  } else if (!ex->why.empty()) {
    KOLO_LOG(warn, "blame chain cut short: " << ex->why << "; blaming the end of the chain so far");
  }
  return ex->blame;
}

}  // namespace kolo::engine
