// algo::Comm on top of the group's Context: stamps messages, keeps the collective's requests,
// drives progress while waiting and turns transport failures and deadlines into exceptions that
// name the peer, the collective and its sequence number.
#pragma once
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "algorithms/comm.hpp"
#include "common/bump_arena.hpp"
#include "engine/blame.hpp"
#include "engine/request_arena.hpp"
#include "engine/context.hpp"
#include "engine/direct_spin.hpp"
#include "engine/scratch.hpp"
#include "engine/tags.hpp"

namespace kolo::engine {

struct GroupInfo {
  std::string name;  // for messages
  // Names the job in flight-recorder dumps when no launcher said (FlightRecorder's fallback):
  // the same on every rank of the group, and on no other job's.
  std::string job;
  int rank = 0;
  int size = 1;
  algo::HostLayout hosts;  // which ranks share a host (from the bootstrap's host identities)
  std::shared_ptr<const BlameBoard> blame;  // null: a timeout names the rank waited for, no exchange

  // A group that runs on another group's connections (split with share_connections): its rank
  // i is the Context's peer ctx_rank[i], and the Context's peer p is its rank from_ctx[p] (-1: not
  // a member). Both empty for the group that owns the Context (the identity). `id` goes into
  // every tag (tags.hpp), so that a message of one group never matches a receive of another;
  // `owner` names the group that owns the connections, for messages.
  std::vector<int> ctx_rank, from_ctx;
  uint16_t id = 0;
  std::string owner;
  // Point-to-point receives from each of its ranks, numbered when the executor posts them (a
  // receive from any source learns its sender only then). Touched only by whichever thread runs
  // the group's operations (the executor's run lock), hence mutable in a shared const GroupInfo.
  mutable std::vector<uint64_t> p2p_recv_seq;

  bool shares() const { return !ctx_rank.empty(); }
  int to_ctx(int r) const { return ctx_rank.empty() ? r : ctx_rank[static_cast<size_t>(r)]; }
  int from_ctx_peer(int p) const {
    if (from_ctx.empty() || p < 0) return p;
    return static_cast<size_t>(p) < from_ctx.size() ? from_ctx[static_cast<size_t>(p)] : -1;
  }
  // "group default" or "group default/split0.color1, on the connections of group default where
  // this is rank 3".
  std::string label() const;
};

// How a rank waits for a message: poll without a system call, then poll and yield the core
// between polls, then sleep (Context::block). When this host runs more ranks than this process
// may use CPUs, a peer the rank waits for is often not running at all: every poll that finds
// nothing should give it the core at once (Open MPI's mpi_yield_when_idle), so the pure spin
// is skipped.
struct WaitPolicy {
  int pure_spin_polls = 64;             // idle polls without a clock read or system call
  std::chrono::microseconds spin{200};  // KOLO_SPIN_US: then poll and yield this long
  // KOLO_YIELD_WHEN_IDLE (auto: when `ranks_on_host` exceeds this process's CPUs).
  static WaitPolicy from_config(int ranks_on_host);
};

// Thrown out of an algorithm that runs directly (EngineComm::go_direct) when it would have to
// wait before it consumed anything: its issuing thread hands the collective to the engine
// instead. Not an std::exception, so that nothing but Executor::run_direct catches it.
struct DirectHandoff {};

class EngineComm final : public algo::Comm {
 public:
  // `reqs` is reset: the previous collective's requests must be finished (done, or failed by
  // the abort that followed its failure).
  // The collective's `timeout` counts from the first time it reads the clock: when a wait first
  // finds nothing to do for a while (a collective that never waits costs no clock read).
  EngineComm(Context& ctx, Scratch& scratch, RequestArena& reqs, BumpArena& temp, const GroupInfo& group, const algo::CollArgs& args,
             const Stamp& stamp, std::chrono::milliseconds timeout, size_t chunk_bytes, const WaitPolicy& wait);

  int rank() const override { return group_.rank; }
  int size() const override { return group_.size; }
  const algo::CollArgs& args() const override { return args_; }
  const algo::HostLayout& hosts() const override { return group_.hosts; }
  algo::Req isend(int peer, const void* buf, size_t bytes) override;
  algo::Req irecv(int peer, void* buf, size_t bytes) override;
  void wait(algo::Req r) override;
  bool test(algo::Req r) override;
  void exchange(int peer, const void* out, size_t out_bytes, void* in, size_t in_bytes) override;
  void reduce(void* dst, const void* src, size_t count) override;
  void reduce(void* dst, const void* a, const void* b, size_t count) override;
  void finalize(void* data, size_t count) override;
  void* scratch(size_t bytes, int slot) override;
  void* temp(size_t bytes) override { return temp_.take(bytes); }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  bool peek_p2p(int peer) override;
  void wait_for_arrival() override;
  void receive_from(int peer) override;

  // A receive from any source: the executor's count of point-to-point receives posted per
  // peer, from which receive_from() takes the chosen pair's next sequence number.
  void set_p2p_recv_counters(uint64_t* per_peer) { p2p_recv_seq_ = per_peer; }
  // The rank receive_from() chose, or -1.
  int source() const { return source_; }

  // "allreduce #7 on rank 1 of 4 (group default)"
  std::string where() const;
  // Where to note the peer a slow wait is for (the flight recorder's slot), or null.
  void set_waiting_slot(std::atomic<int>* slot) { waiting_slot_ = slot; }

  // The direct path (Executor::run_direct), for groups of at most kMaxDirectRanks ranks whose
  // pairs move messages at once: a send goes out at once (Pair::send_now) and a receive is held
  // (nothing posted) until it is waited for, then taken at once (Pair::recv_now). Before the
  // algorithm consumes its first message every held receive must have arrived, waiting at most
  // `spin` for them; otherwise, or if a send is declined, DirectHandoff is thrown (sends_done()
  // have gone out, skipped ones included). Once something was consumed the algorithm cannot
  // start again, so a message that is not there (an algorithm that receives in several rounds)
  // is posted the ordinary way and waited for as usual.
  static constexpr int kMaxDirectRanks = 64;
  void go_direct(std::chrono::microseconds spin) {
    direct_ = true;
    direct_spin_ = spin;
  }
  uint32_t sends_done() const { return sends_done_; }
  bool direct() const { return direct_; }
  // The collective's first `n` sends went out in a direct attempt: the next n isend() calls
  // complete at once without sending.
  void skip_sends(uint32_t n) { skip_sends_ = n; }

 private:
  transport::Request& get(algo::Req r);
  [[noreturn]] void raise(const transport::Request& r);
  [[noreturn]] void raise_group_failure();
  // Inline: every isend and irecv passes here; only the refusal is out of line.
  void check_peer(int peer) const {
    if (peer < 0 || peer >= group_.size || peer == group_.rank) [[unlikely]]
      bad_peer(peer);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_peer(int peer) const;
  // A send that is complete already (a skipped or a direct send): no request behind it, only
  // this id, which wait() and test() answer at once. Saves filling a request per direct send.
  static constexpr int32_t kSentId = INT32_MAX;
  static algo::Req sent() { return algo::Req{kSentId}; }
  // Direct path: whether every held receive not yet taken has arrived, polling at most
  // direct_spin_; posting the held receives and going on the ordinary way.
  bool held_arrive();
  void post_held();
  [[noreturn]] void hand_off() { throw DirectHandoff{}; }
  DirectSpin spin() const { return DirectSpin(ctx_, direct_spin_, wait_.pure_spin_polls > 0); }

  Context& ctx_;
  Scratch& scratch_;
  const GroupInfo& group_;  // the executor's, which outlives every collective it runs
  const algo::CollArgs& args_;  // the running task's, which outlives this comm
  const Stamp& stamp_;  // the task's, which outlives this comm
  transport::Tag tag_;
  // Set at the first clock read (deadline()).
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::steady_clock::time_point deadline(std::chrono::steady_clock::time_point now) {
    if (deadline_ == std::chrono::steady_clock::time_point{}) deadline_ = now + timeout_;
    return deadline_;
  }
  std::chrono::milliseconds timeout_;
  size_t chunk_bytes_;
  WaitPolicy wait_;
  RequestArena& reqs_;  // stable addresses while the transport holds them; reused per collective
  BumpArena& temp_;     // the algorithm's bookkeeping; reset per collective
  std::atomic<int>* waiting_slot_ = nullptr;
  // Receive from any source (recv_any.cpp).
  uint64_t* p2p_recv_seq_ = nullptr;
  int source_ = -1;
  WaitFor waits_{true, 0, -1};  // what a timed-out wait says it waited for (the blame chain)
  std::chrono::steady_clock::time_point arrival_spin_until_{};
  // The direct path. held_ is not initialised: only its first n_held_ entries are ever read.
  struct Held {
    int32_t id;  // the request (state idle while held, done once taken)
    void* buf;
    transport::Pair* pair;  // the peer's, looked up once
  };
  bool direct_ = false;
  bool consumed_ = false;  // a held receive was taken: no hand-off from here on
  uint32_t sends_done_ = 0, skip_sends_ = 0;
  std::chrono::microseconds direct_spin_{0};
  int n_held_ = 0;
  Held held_[kMaxDirectRanks];
};

// "allreduce #7", or "recv from any source #2 (tag 5)": how errors name an operation.
std::string describe_operation(const algo::CollArgs& args, uint64_t seq);

// Shared with point-to-point handling in the executor. The TimeoutError of a wait for `r` that
// passed its deadline: with a board, after settling whom to blame (blame.hpp), it names the rank
// at the end of the wait-for chain (its peer_rank()); else, as without, the rank waited for.
[[noreturn]] void raise_timeout(const std::string& where, std::chrono::milliseconds timeout, const transport::Request& r,
                                const WaitFor& w, const BlameBoard* board);
// The same for a request of group `g`, whose peers the Context numbers its own way: the message,
// the blame chain and peer_rank() use g's ranks.
[[noreturn]] void raise_timeout(const std::string& where, std::chrono::milliseconds timeout, const transport::Request& r,
                                bool collective, uint64_t seq, const GroupInfo& g);
std::string format_timeout(const std::string& where, std::chrono::milliseconds timeout, const transport::Request& r,
                           const Blame* blame);
// `g` is the group whose operation `r` belongs to: ranks are named in its numbering.
[[noreturn]] void raise_request_failure(const std::string& where, const transport::Request& r, const Context& ctx,
                                        const GroupInfo& g);
// Throws the group's first failure as seen from `where`, with the same exception type the rank
// that first saw it raised (TimeoutError, MismatchError or PeerError).
[[noreturn]] void raise_failure(const std::string& where, const PeerFailure& f);
// The Context's failure as group `g` sees it: the culprit in g's ranks (-1 if not a member), and
// the detail, which names the Context's ranks, says which rank that is.
PeerFailure as_seen_by(const GroupInfo& g, PeerFailure f);
// The rank to blame and the kind of a kolo exception, for the abort notice.
void classify(const std::exception& e, int* culprit, ErrorKind* kind);

}  // namespace kolo::engine
