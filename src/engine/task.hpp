// An operation as the engine runs it (Task), and the Work it lives in (Operation).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>

#include "algorithms/algorithm.hpp"
#include "engine/engine_comm.hpp"
#include "engine/flight_recorder.hpp"
#include "engine/tags.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

// What an operation waits for before it may start, beside its turn: a device operation's
// inputs copied out of device memory (device_work.hpp). Throws (TimeoutError) past `deadline`.
struct RunGate {
  virtual void gate(std::chrono::steady_clock::time_point deadline) = 0;

 protected:
  ~RunGate() = default;
};

// An operation as the engine runs it. It lives inside its Work (Operation below), so issuing,
// queueing and running it moves a pointer, never the task: the queue, the inline batch and the
// list of posted sends and receives hold Task*.
struct Task {
  enum class Type { collective, point_to_point, close };
  Type type = Type::collective;
  algo::CollArgs args;
  const algo::Algorithm* algorithm = nullptr;
  Stamp stamp;
  std::chrono::milliseconds timeout{0};
  // The engine's reference to the Work this task lives in, from submit() until the operation
  // has ended (Executor::release): a Work the caller dropped stays alive while queued.
  WorkPtr work;
  bool overlap = false;   // Options.overlap: start on the engine thread at once
  RunGate* gate = nullptr;  // set for every issue (null for host memory); outlives the run
  uint32_t skip_sends = 0;  // sent already by a direct attempt that handed over (run_direct)
  bool deferred = false;  // left for the waiting caller to run (see above)
  uint64_t ticket = 0;    // position in the order of submission (OperationQueue numbers it)
  FlightEntry* fr = nullptr;  // its slot in the flight recorder (null when that is off)
  // The group it belongs to when that is a subgroup sharing this executor's connections
  // (ProcessGroup::split with share_connections); null for the executor's own group.
  std::shared_ptr<const GroupInfo> group;
  // alltoallv's counts and displacements, which args.v points to: kept while the task lives.
  std::shared_ptr<const algo::VarCounts> var_counts;
};

// A Work with its task in the same block (one allocation from the group's Work pool).
struct Operation final : Work {
  Operation(Work::Token token, const char* op_name, uint64_t seq) : Work(token, op_name, seq) {}
  Task task;
};

}  // namespace kolo::engine
