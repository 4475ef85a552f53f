// The group's engine thread. Operations run one after another in issue order: a collective runs
// its algorithm to completion; a point-to-point operation is posted and then completes in the
// background, so a send and a receive issued by two ranks towards each other never deadlock.
// The first failure aborts the group: peers are told, every later operation fails fast.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "algorithms/algorithm.hpp"
#include "engine/context.hpp"
#include "engine/engine_comm.hpp"
#include "engine/scratch.hpp"
#include "engine/tags.hpp"
#include "kolo/work.hpp"

namespace kolo::engine {

struct Task {
  enum class Type { collective, point_to_point, close };
  Type type = Type::collective;
  algo::CollArgs args;
  const algo::Algorithm* algorithm = nullptr;
  Stamp stamp;
  std::chrono::milliseconds timeout{0};
  WorkPtr work;
};

class Executor {
 public:
  Executor(std::unique_ptr<Context> ctx, GroupInfo group, std::chrono::milliseconds close_timeout);
  ~Executor();  // stops the thread; the caller shut down or aborted first

  void submit(Task t);
  // Requests an abort from any thread: the running operation fails with `reason`.
  void request_abort(const std::string& reason);
  // Queues an orderly close after everything already queued and waits for the thread to end.
  // Throws if a peer turned out to have failed or aborted during the goodbye.
  void close_and_join();
  bool failed() const;

 private:
  struct Pending {  // a posted point-to-point operation
    std::unique_ptr<transport::Request> req;
    WorkPtr work;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    std::string where;
  };

  void loop();
  void wait_for_work();
  void run_collective(Task& t);
  void post_point_to_point(Task& t);
  void check_pending();
  void fail_group(const std::string& reason, int culprit, ErrorKind kind);
  void fail_group(const std::exception& e);
  std::exception_ptr not_run_error(const Task& t) const;
  std::string where(const Task& t) const;

  std::unique_ptr<Context> ctx_;
  GroupInfo group_;
  std::chrono::milliseconds close_timeout_;
  Scratch scratch_;
  size_t chunk_bytes_;
  std::chrono::microseconds spin_;
  std::atomic<int> queued_{0};  // queue_.size(), readable without the lock

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool closing_ = false;

  std::list<Pending> pending_;  // touched by the engine thread only
  std::exception_ptr group_error_;
  std::string group_error_text_;
  std::atomic<bool> failed_{false};
  std::exception_ptr close_error_;
  bool error_delivered_ = false;          // some Work has carried the group's error to the user
  std::atomic<bool> user_aborted_{false};
  std::thread thread_;
};

}  // namespace kolo::engine
