#include "thread_comm.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>

#include "kernels/cpu/reduce.hpp"
#include "kolo/error.hpp"

namespace kolo::testing {
namespace {

using Clock = std::chrono::steady_clock;

// One posted send or receive. Owned by the world so that a peer can still complete its side
// after the poster's Comm is gone.
struct Op {
  bool is_send = false;
  int owner = 0;  // the rank that posted it
  int peer = 0;
  int number = 0;  // position among the owner's messages to/from that peer in that direction
  const void* send_buf = nullptr;
  void* recv_buf = nullptr;
  size_t bytes = 0;
  Op* match = nullptr;  // set once both sides are posted
  bool copied = false;
  bool completed = false;  // its owner saw it done (wait, or test returning true)
};

std::string describe(const Op& op) {
  return std::string(op.is_send ? "send #" : "receive #") + std::to_string(op.number) + (op.is_send ? " to" : " from") +
         " rank " + std::to_string(op.peer) + " (" + std::to_string(op.bytes) + " bytes)";
}

// Thrown on ranks that stop because another rank already failed; not itself reported.
struct Aborted : std::runtime_error {
  Aborted() : std::runtime_error("aborted: another rank failed") {}
};

}  // namespace

struct ThreadWorld::State {
  int n;
  HarnessOptions opts;
  std::mutex mu;
  std::vector<std::condition_variable> wakeups;  // per rank: only the ranks a match concerns wake up
  std::deque<Op> ops;
  std::vector<std::deque<Op*>> sends, recvs;  // unmatched, per (src * n + dst)
  std::vector<int> sent, received;            // messages posted so far, per (src * n + dst)
  bool aborted = false;
  std::string failure;
  std::string label;

  algo::HostLayout layout;

  State(int nranks, HarnessOptions o) : n(nranks), opts(o), wakeups(static_cast<size_t>(nranks)) {
    std::vector<int> hosts = opts.hosts;
    if (hosts.empty())
      for (int r = 0; r < n; ++r) hosts.push_back(r / 2);
    if (static_cast<int>(hosts.size()) != n) throw std::invalid_argument("HarnessOptions::hosts needs one entry per rank");
    layout = algo::HostLayout::from_indices(hosts);
    reset("");
  }

  void reset(const std::string& l) {
    const auto pairs = static_cast<size_t>(n) * static_cast<size_t>(n);
    ops.clear();
    sends.assign(pairs, {});
    recvs.assign(pairs, {});
    sent.assign(pairs, 0);
    received.assign(pairs, 0);
    aborted = false;
    failure.clear();
    label = l;
  }

  // Records the first failure and wakes every waiting rank. Caller holds mu.
  void fail(const std::string& what) {
    if (!aborted) {
      aborted = true;
      failure = label + ": " + what;
    }
    for (auto& w : wakeups) w.notify_all();
  }

  // Every message posted but not matched, for deadlock reports. Caller holds mu.
  std::string unmatched() const {
    std::string out;
    for (const auto* queues : {&sends, &recvs})
      for (const auto& q : *queues)
        for (const Op* op : q) out += "\n    rank " + std::to_string(op->owner) + ": " + describe(*op);
    return out.empty() ? " none" : out;
  }
};

namespace {

class ThreadComm final : public algo::Comm {
 public:
  ThreadComm(ThreadWorld::State& s, int rank, const algo::CollArgs& args) : s_(s), rank_(rank), args_(args) {}

  int rank() const override { return rank_; }
  int size() const override { return s_.n; }
  const algo::CollArgs& args() const override { return args_; }
  const algo::HostLayout& hosts() const override { return s_.layout; }
  algo::Req isend(int peer, const void* buf, size_t bytes) override { return post(true, peer, buf, nullptr, bytes); }
  algo::Req irecv(int peer, void* buf, size_t bytes) override { return post(false, peer, nullptr, buf, bytes); }

  void wait(algo::Req r) override {
    Op* op = get(r);
    std::unique_lock lk(s_.mu);
    const auto deadline = Clock::now() + s_.opts.deadline;
    while (op->match == nullptr) {
      if (s_.aborted) throw Aborted();
      if (s_.wakeups[static_cast<size_t>(rank_)].wait_until(lk, deadline) == std::cv_status::timeout && op->match == nullptr && !s_.aborted) {
        s_.fail("rank " + std::to_string(rank_) + " waited " + std::to_string(s_.opts.deadline.count()) +
                " ms for its " + describe(*op) + ": deadlock. Messages posted and never matched:" + s_.unmatched());
        throw TimeoutError(s_.failure);
      }
    }
    complete(*op);
  }

  bool test(algo::Req r) override {
    Op* op = get(r);
    {
      std::lock_guard lk(s_.mu);
      if (s_.aborted) throw Aborted();
      if (op->match != nullptr) {
        complete(*op);
        return true;
      }
    }
    std::this_thread::yield();  // a polling loop must not starve the peers on a small machine
    return false;
  }

  void reduce(void* dst, const void* src, size_t count) override {
    kernels::reduce_inplace(args_.dtype, args_.op.kind, dst, src, count);
  }
  void reduce(void* dst, const void* a, const void* b, size_t count) override {
    kernels::reduce(args_.dtype, args_.op.kind, dst, a, b, count);
  }
  void finalize(void* data, size_t count) override { kernels::finalize(args_.dtype, args_.op, data, count, s_.n); }

  void* scratch(size_t bytes, int slot) override {
    if (slot < 0 || slot > 64) refuse("scratch slot " + std::to_string(slot) + " is out of range 0..64");
    Scratch& s = scratch_[slot];
    if (s.mem && bytes <= s.bytes) return s.mem.get();
    if (s.mem)
      refuse("scratch slot " + std::to_string(slot) + " asked for again with " + std::to_string(bytes) + " bytes after " +
             std::to_string(s.bytes) + " (the group's scratch would reallocate, invalidating the first pointer)");
    // Exactly the bytes asked for, so AddressSanitizer sees an overrun; garbage inside, so
    // an algorithm relying on zeroed scratch fails.
    const size_t n = bytes == 0 ? 1 : bytes;
    s.mem.reset(static_cast<unsigned char*>(::operator new(n, std::align_val_t{64})));
    s.bytes = bytes;
    std::memset(s.mem.get(), 0xA5, n);
    return s.mem.get();
  }

  void* temp(size_t bytes) override {
    // A separate piece each time, exactly as long as asked and full of garbage: an overrun
    // (AddressSanitizer) or a read of what was never written (wrong results) shows up.
    const size_t n = bytes == 0 ? 1 : bytes;
    temps_.emplace_back(static_cast<unsigned char*>(::operator new(n, std::align_val_t{64})));
    std::memset(temps_.back().get(), 0x5A, n);
    return temps_.back().get();
  }

  size_t chunk_bytes() const override { return s_.opts.chunk_bytes; }

 private:
  struct AlignedDelete {
    void operator()(unsigned char* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  struct Scratch {
    std::unique_ptr<unsigned char, AlignedDelete> mem;
    size_t bytes = 0;
  };

  [[noreturn]] void refuse(const std::string& why) {
    std::lock_guard lk(s_.mu);
    s_.fail("rank " + std::to_string(rank_) + ": " + why);
    throw std::logic_error(s_.failure);
  }

  algo::Req post(bool is_send, int peer, const void* sbuf, void* rbuf, size_t bytes) {
    if (peer < 0 || peer >= s_.n || peer == rank_)
      refuse(std::string(is_send ? "send to" : "receive from") + " rank " + std::to_string(peer) + " in a group of " +
             std::to_string(s_.n));
    if (bytes != 0 && (is_send ? sbuf == nullptr : rbuf == nullptr))
      refuse(std::string(is_send ? "send" : "receive") + " of " + std::to_string(bytes) + " bytes with a null buffer");
    std::lock_guard lk(s_.mu);
    if (s_.aborted) throw Aborted();
    const int src = is_send ? rank_ : peer, dst = is_send ? peer : rank_;
    const size_t pair = static_cast<size_t>(src) * static_cast<size_t>(s_.n) + static_cast<size_t>(dst);
    Op& op = s_.ops.emplace_back();
    op.is_send = is_send;
    op.owner = rank_;
    op.peer = peer;
    op.number = is_send ? s_.sent[pair]++ : s_.received[pair]++;
    op.send_buf = sbuf;
    op.recv_buf = rbuf;
    op.bytes = bytes;
    (is_send ? s_.sends : s_.recvs)[pair].push_back(&op);
    // At most one of the two queues was non-empty before this post: match the heads.
    auto& sq = s_.sends[pair];
    auto& rq = s_.recvs[pair];
    if (!sq.empty() && !rq.empty()) {
      Op* snd = sq.front();
      Op* rcv = rq.front();
      sq.pop_front();
      rq.pop_front();
      if (snd->bytes != rcv->bytes) {
        s_.fail("size mismatch: rank " + std::to_string(src) + "'s " + describe(*snd) + " met rank " + std::to_string(dst) +
                "'s " + describe(*rcv));
        throw MismatchError(s_.failure, peer);
      }
      snd->match = rcv;
      rcv->match = snd;
      s_.wakeups[static_cast<size_t>(snd->owner)].notify_all();
      s_.wakeups[static_cast<size_t>(rcv->owner)].notify_all();
    }
    reqs_.push_back(&op);
    return algo::Req{static_cast<int32_t>(reqs_.size() - 1)};
  }

  Op* get(algo::Req r) {
    if (r.id < 0 || static_cast<size_t>(r.id) >= reqs_.size()) refuse("invalid request handle " + std::to_string(r.id));
    return reqs_[static_cast<size_t>(r.id)];
  }

  // The copy happens here, when the first of the two sides looks at the matched pair.
  // Caller holds mu.
  void complete(Op& op) {
    if (!op.copied) {
      const Op& snd = op.is_send ? op : *op.match;
      const Op& rcv = op.is_send ? *op.match : op;
      if (op.bytes != 0) std::memcpy(rcv.recv_buf, snd.send_buf, op.bytes);
      op.copied = op.match->copied = true;
    }
    op.completed = true;
  }

  ThreadWorld::State& s_;
  const int rank_;
  const algo::CollArgs args_;
  std::vector<Op*> reqs_;
  std::map<int, Scratch> scratch_;
  std::vector<std::unique_ptr<unsigned char, AlignedDelete>> temps_;  // temp(): freed with the collective
};

}  // namespace

ThreadWorld::ThreadWorld(int nranks, HarnessOptions opts) : state_(std::make_unique<State>(nranks, opts)) {}
ThreadWorld::~ThreadWorld() = default;

int ThreadWorld::size() const { return state_->n; }

std::unique_ptr<algo::Comm> ThreadWorld::make_comm(int rank, const algo::CollArgs& args) {
  return std::make_unique<ThreadComm>(*state_, rank, args);
}

std::string ThreadWorld::run(const std::string& label, const std::function<void(int)>& body) {
  State& s = *state_;
  s.reset(label);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(s.n));
  for (int r = 0; r < s.n; ++r) {
    threads.emplace_back([&s, &body, r] {
      try {
        body(r);
      } catch (const Aborted&) {
        // Another rank's failure is the one reported.
      } catch (const std::exception& e) {
        std::lock_guard lk(s.mu);
        if (!s.aborted) s.fail("rank " + std::to_string(r) + " threw: " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  if (s.aborted) return s.failure;
  for (const auto* queues : {&s.sends, &s.recvs})
    for (const auto& q : *queues)
      if (!q.empty())
        return label + ": rank " + std::to_string(q.front()->owner) + "'s " + describe(*q.front()) + " was never matched";
  for (const Op& op : s.ops)
    if (!op.completed) return label + ": rank " + std::to_string(op.owner) + " never waited for its " + describe(op);
  return "";
}

std::string run_algorithm(const algo::Algorithm& algo, const std::vector<algo::CollArgs>& args, const HarnessOptions& opts) {
  ThreadWorld world(static_cast<int>(args.size()), opts);
  const std::string label = std::string(algo::coll_name(args.empty() ? algo::CollKind::barrier : args[0].kind)) + " algorithm " + algo.name + " on " +
                            std::to_string(args.size()) + " ranks";
  return world.run(label, [&](int r) {
    auto comm = world.make_comm(r, args[static_cast<size_t>(r)]);
    algo.run(*comm);
  });
}

}  // namespace kolo::testing
