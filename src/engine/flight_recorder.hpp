// The flight recorder: each group keeps its last KOLO_FR_SIZE operations (what, how big, which
// algorithm, state, when, and which peer a stuck one waits for) in a ring allocated once. When
// the group fails (a timeout, a dead or mismatched peer) or the process gets SIGUSR1, it writes
// them to KOLO_FR_DIR as JSON and text, named and labelled by the job (job_id_from_environment:
// the id every rank of one launch shares), so that one folder can hold several jobs' dumps;
// tools/kolo-trace/kolo-trace merges the dumps of one job's ranks and says which rank is behind, in which
// collective. With KOLO_TRACE=file it also writes a Chrome trace
// (Perfetto) of every operation when the group ends.
//
// Cost on the hot path (KOLO_FR_SIZE > 0): no allocation, no lock, no clock read; per operation a
// slot write at issue, a start and a finish mark, each with a time-stamp counter read (ticks.hpp),
// turned into times only when the ring is dumped. An operation left for its caller to run
// (deferred: the caller waits for it at once, as a synchronous collective does) takes no issue
// time: issue and start are then the same moment as far as a dump can tell, and a dump shows it
// as 0 ("not stamped") until it starts. The waited-for peer is written only on a wait's slow
// path. An operation that completed in the call that issued it (the direct path: a few hundred
// nanoseconds, of which a counter read is 12 ns here) is dated only one time in 16, and always
// with KOLO_TRACE; the others show 0 ("not stamped"): their neighbours in the ring date them to
// within a few microseconds, and a hang is never one of them.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/ticks.hpp"

namespace kolo::engine {

struct FlightEntry {
  enum State : int { queued = 0, running = 1, done = 2, failed = 3 };
  std::atomic<uint64_t> version{0};  // odd while the fixed fields are being rewritten
  // Fixed at issue.
  uint64_t seq = 0;
  const char* op = "";         // static names
  const char* algorithm = "";
  uint64_t bytes = 0;
  int root = -1;
  uint64_t issued = 0;         // ticks (common/ticks.hpp); 0 for one its caller runs (above)
  // Updated as the operation moves.
  std::atomic<int> state{queued};
  std::atomic<int> waiting_on{-1};
  std::atomic<uint64_t> started{0};   // ticks; 0: not yet
  std::atomic<uint64_t> finished{0};
  std::atomic<const char*> transport{""};
};

class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  // capacity 0: off (every call is a no-op and record() returns null). `job_fallback`: the job
  // id when the launch environment names none (job_id_from_environment).
  FlightRecorder(size_t capacity, int rank, int size, std::string group, const std::string& job_fallback = "");
  ~FlightRecorder();  // writes the Chrome trace when KOLO_TRACE is set
  static std::unique_ptr<FlightRecorder> from_config(int rank, int size, const std::string& group,
                                                     const std::string& job_fallback = "");

  // The id of the job this process belongs to, the same in every rank of one launch, as the
  // launch environment tells it: KOLO_JOB_ID (kolorun, per launch); else TORCHELASTIC_RUN_ID
  // (torchrun's --rdzv-id; not its default "none"), with "-attempt<n>" after a restart
  // (TORCHELASTIC_RESTART_COUNT); else SLURM_JOB_ID[.SLURM_STEP_ID]; else Open MPI's job id
  // (OMPI_MCA_orte_ess_jobid, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE); else the rendezvous
  // address, "master-<MASTER_ADDR>-<MASTER_PORT>"; else `fallback`. Only letters, digits, '.',
  // '-' and '_' are kept (it names files), at most 64 characters.
  static std::string job_id_from_environment(const std::string& fallback = "");
  // The launch's world size (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS), or `fallback`.
  static int world_size_from_environment(int fallback);
  const std::string& job() const { return job_; }

  // Each marks the time itself (ticks_now()). record() has one caller at a time (the executor,
  // under its queue lock).
  // `stamp`: read the issue time (operations the engine thread will run).
  // Inline, as are claim(), fill() and publish(): every collective is recorded.
  FlightEntry* record(uint64_t seq, const char* op, const char* algorithm, uint64_t bytes, int root, bool stamp) {
    if (ring_.empty()) return nullptr;
    uint64_t v;
    FlightEntry& e = claim(&v);
    fill(e, {seq, op, algorithm, bytes, root, stamp ? ticks_now() : 0, FlightEntry::queued, 0, 0, ""});
    publish(e, v);
    return &e;
  }
  // `stamp` false: running from now, its start time left for finished() to fill (a collective
  // the direct path runs in its issuing call, which usually ends a few hundred nanoseconds later:
  // one clock read, 13 ns here, instead of two).
  void started(FlightEntry* e, const char* transport, bool stamp = true);
  void finished(FlightEntry* e, bool ok);
  // started() and finished(ok) at once: an operation that completed in the call that issued it
  // (the direct path), where the two marks would be nanoseconds apart. Dated one time in 16.
  void ran(FlightEntry* e, const char* transport) {  // inline: every direct collective passes here
    if (!e) return;
    const uint64_t now = date_direct();
    e->started.store(now, std::memory_order_relaxed);
    e->finished.store(now, std::memory_order_relaxed);
    e->transport.store(transport, std::memory_order_relaxed);
    e->state.store(FlightEntry::done, std::memory_order_release);
    if (!trace_path_.empty()) trace_event(*e);
  }
  // record() and ran() in one write, after the fact: for an operation that completed before its
  // issuing call let go of the queue lock, so that the ring stays in issue order.
  void record_ran(uint64_t seq, const char* op, const char* algorithm, uint64_t bytes, int root,
                  const char* transport) {  // inline: every send or receive done at once passes here
    if (ring_.empty()) return;
    uint64_t v;
    FlightEntry& e = claim(&v);
    const uint64_t now = date_direct();
    fill(e, {seq, op, algorithm, bytes, root, 0, FlightEntry::done, now, now, transport});
    publish(e, v);
    if (!trace_path_.empty()) trace_event(e);
  }

  // The ring as JSON / text, oldest first; `reason` says why it was dumped. The JSON (written
  // with nlohmann/json, only here: recording never touches it) is one object: rank, size (the
  // group's), group, job, world_size, pid, reason, and entries (seq, op, bytes, root, algorithm,
  // transport, state, waiting_on, issued_us, started_us, finished_us), in that order.
  std::string json(const std::string& reason) const;
  std::string text(const std::string& reason) const;
  // Writes both to KOLO_FR_DIR as <job>.<group>.rank<r>.json and .txt (<group>.rank<r> when no
  // job id is known); returns the JSON file's path ("" when off or on error).
  std::string dump(const std::string& reason) const;

 private:
  struct Snapshot {
    uint64_t seq;
    std::string op, algorithm, transport;
    uint64_t bytes;
    int root, state, waiting_on;
    int64_t issued_ns, started_ns, finished_ns;
  };
  std::vector<Snapshot> snapshot() const;
  void trace_event(const FlightEntry& e);
  // The slot for a new entry, marked as being rewritten (odd version): the caller fills it and
  // calls publish().
  FlightEntry& claim(uint64_t* version) {
    // One writer: the executor calls record() under its queue lock, so plain loads and stores do
    // (no locked read-modify-write on every issue); the dumper, another thread, only reads.
    const uint64_t n = next_.load(std::memory_order_relaxed);
    const size_t cap = ring_.size();  // a mask for a power of two (the default 256): no division
    FlightEntry& e = ring_[(cap & (cap - 1)) == 0 ? n & (cap - 1) : n % cap];
    const uint64_t v = e.version.load(std::memory_order_relaxed);
    e.version.store(v + 1, std::memory_order_relaxed);  // odd: being rewritten
    std::atomic_thread_fence(std::memory_order_release);  // the odd version before the fields
    *version = v;
    return e;
  }
  struct Fields {
    uint64_t seq;
    const char* op;
    const char* algorithm;
    uint64_t bytes;
    int root;
    uint64_t issued;
    FlightEntry::State state;
    uint64_t started, finished;
    const char* transport;
  };
  static void fill(FlightEntry& e, const Fields& f) {  // every field of a claimed entry
    e.seq = f.seq;
    e.op = f.op;
    e.algorithm = f.algorithm;
    e.bytes = f.bytes;
    e.root = f.root;
    e.issued = f.issued;
    e.state.store(f.state, std::memory_order_relaxed);
    e.waiting_on.store(-1, std::memory_order_relaxed);
    e.started.store(f.started, std::memory_order_relaxed);
    e.finished.store(f.finished, std::memory_order_relaxed);
    e.transport.store(f.transport, std::memory_order_relaxed);
  }
  void publish(FlightEntry& e, uint64_t version) {
    e.version.store(version + 2, std::memory_order_release);
    next_.store(next_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // The time of an operation that completed in its issuing call (ticks), or 0 (not dated).
  uint64_t date_direct() { return (++direct_ops_ & 15) == 0 || !trace_path_.empty() ? ticks_now() : 0; }

  std::vector<FlightEntry> ring_;
  TickScale scale_;  // the entries' ticks as steady-clock times
  std::atomic<uint64_t> next_{0};
  uint64_t direct_ops_ = 0;  // operations ran() or record_ran() marked (their one caller at a time)
  int rank_, size_;
  std::string group_;
  std::string job_;  // job_id_from_environment(), read once at construction
  int world_size_;   // world_size_from_environment(size)
  // Wall time of the steady clock's zero, so dumps of different ranks share a time base.
  int64_t wall_offset_ns_;
  std::string trace_path_;  // KOLO_TRACE, per rank (the events go to a process-wide list)
};

}  // namespace kolo::engine
