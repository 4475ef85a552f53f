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

struct Exchange {  // shared by the caller and the helper thread, which may outlive the caller's wait
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<Blame> blame;
  std::string why;  // when blame is empty
};

// The helper thread's work: publish, then follow entries until a rank has published nothing by
// `deadline`. Runs on copies: the board may be gone by the time a slow store answers.
void publish_and_follow(Store& store, const BlameBoard& board, int rank, int size, const WaitFor& w,
                        Clock::time_point deadline, Exchange& out) {
  store.set(board.key(rank), encode_wait(w));
  Blame b{{w.peer}};
  std::vector<bool> seen(static_cast<size_t>(size), false);
  seen[static_cast<size_t>(rank)] = seen[static_cast<size_t>(w.peer)] = true;
  WaitFor at = w;  // the wait that led to chain.back()
  // Timed-out ranks publish within milliseconds of one another when they stopped together; a
  // short pause growing to 20 ms finds them fast without hammering the store for the grace.
  milliseconds pause(1);
  for (;;) {
    const std::string k = board.key(b.culprit());
    if (store.check({k})) {
      const std::optional<WaitFor> next = decode_wait(store.get_string(k));
      if (!next || next->peer < 0 || next->peer >= size || !continues(at, *next)) {
        out.why = "rank " + std::to_string(b.culprit()) + "'s entry does not continue the chain";
        return;
      }
      if (seen[static_cast<size_t>(next->peer)]) {
        out.why = "the chain loops back to rank " + std::to_string(next->peer);
        return;
      }
      seen[static_cast<size_t>(next->peer)] = true;
      b.chain.push_back(next->peer);
      at = *next;
      pause = milliseconds(1);
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      out.blame = std::move(b);
      return;
    }
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
      Exchange local;
      try {
        publish_and_follow(*board->store_, *board, board->rank_, board->size_, w, deadline, local);
      } catch (const std::exception& e) {
        local.why = std::string("the store failed: ") + e.what();
      }
      std::lock_guard<std::mutex> lk(ex->mu);
      ex->blame = std::move(local.blame);
      ex->why = std::move(local.why);
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
    KOLO_LOG(warn, "blame chain skipped: the store did not answer within " << grace.count() + kLastAnswer.count()
                                                                          << " ms; naming the rank waited for");
    return std::nullopt;
  }
  if (!ex->blame) KOLO_LOG(warn, "blame chain skipped: " << ex->why << "; naming the rank waited for");
  return ex->blame;
}

}  // namespace kolo::engine
