#include "work.hpp"

#include <ATen/core/jit_type.h>

#include "kolo/error.hpp"

namespace kolo_torch {

struct KoloWork::State {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
  bool done = false;
  std::exception_ptr error;
  std::function<void()> finish;
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> keep;
  c10::intrusive_ptr<c10::ivalue::Future> future;

  // One part completed (on kolo's completing thread); the last one finishes the operation.
  void part_done(std::exception_ptr part_error) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!error && part_error) error = part_error;
      if (--remaining > 0) return;
      fn = std::move(finish);
    }
    std::exception_ptr err;
    {
      std::lock_guard<std::mutex> lk(mu);
      err = error;
    }
    if (!err && fn) {
      try {
        fn();
      } catch (...) {
        err = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      error = err;
      done = true;
      keep.clear();
    }
    cv.notify_all();
    // Outside the lock: the future's callbacks (DDP hooks, Python then()) run here.
    if (err)
      future->setError(err);
    else
      future->markCompleted(c10::IValue(outputs));
  }
};

KoloWork::KoloWork(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts, std::shared_ptr<State> state)
    : c10d::Work(rank, type), parts_(std::move(parts)), state_(std::move(state)) {}

c10::intrusive_ptr<KoloWork> KoloWork::start(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts,
                                             std::vector<at::Tensor> outputs, std::function<void()> finish,
                                             std::vector<at::Tensor> keep) {
  auto st = std::make_shared<State>();
  st->remaining = parts.size() + 1;  // +1: released below, after every callback is registered
  st->finish = std::move(finish);
  st->outputs = std::move(outputs);
  st->keep = std::move(keep);
  st->future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  auto work = c10::make_intrusive<KoloWork>(rank, type, parts, st);
  for (auto& p : parts) p->on_complete([st](kolo::Work& w) { st->part_done(w.exception()); });
  // The extra count: an operation with no kolo part (nothing to move) completes here.
  st->part_done(nullptr);
  return work;
}

c10::intrusive_ptr<KoloWork> KoloWork::join(int rank, c10d::OpType type,
                                            const std::vector<c10::intrusive_ptr<KoloWork>>& works,
                                            std::vector<at::Tensor> outputs) {
  std::vector<kolo::WorkPtr> parts;
  std::vector<std::shared_ptr<State>> states;
  for (const auto& w : works) {
    parts.insert(parts.end(), w->parts_.begin(), w->parts_.end());
    states.push_back(w->state_);
  }
  // Runs after the last part's callbacks, which were registered (and so run) before this join's:
  // every sub-work has finished by then, and this only collects their errors.
  return start(rank, type, std::move(parts), std::move(outputs), [states] {
    for (const auto& st : states) {
      std::lock_guard<std::mutex> lk(st->mu);
      if (st->error) std::rethrow_exception(st->error);
    }
  });
}

bool KoloWork::isCompleted() {
  // kolo's is_completed() also tells its engine that someone polls, so a queued part starts
  // on the engine thread instead of waiting for a waiter to run it.
  for (auto& p : parts_) p->is_completed();
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->done;
}

bool KoloWork::isSuccess() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->done && !state_->error;
}

std::exception_ptr KoloWork::exception() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->error;
}

bool KoloWork::wait(std::chrono::milliseconds timeout) {
  // kolo::Work::wait runs a still-queued operation on this thread (no hand-off to the engine
  // thread), so waiting on the parts, not only on the state, matters for latency.
  const auto t = timeout.count() > 0 ? timeout : kolo::Work::kNoTimeout;
  const auto deadline = std::chrono::steady_clock::now() + t;
  for (auto& p : parts_) {
    auto left = t;
    if (t != kolo::Work::kNoTimeout) {
      left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() < 0) left = std::chrono::milliseconds(0);
    }
    try {
      p->wait(left);
    } catch (const kolo::TimeoutError&) {
      if (p->is_completed()) continue;  // the operation's own error is reported below
      throw;
    } catch (...) {
      // The part's error; rethrown below once the finish step and future are settled.
    }
  }
  std::unique_lock<std::mutex> lk(state_->mu);
  state_->cv.wait(lk, [&] { return state_->done; });  // callbacks have run once the parts' wait returned
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> KoloWork::getFuture() { return state_->future; }

std::vector<at::Tensor> KoloWork::result() { return state_->outputs; }

int KoloWork::sourceRank() const {
  if (opType_ != c10d::OpType::RECV && opType_ != c10d::OpType::RECVANYSOURCE) return c10d::Work::sourceRank();
  if (parts_.size() == 1 && parts_[0]->source_rank() >= 0) return parts_[0]->source_rank();
  if (source_ >= 0) return source_;
  TORCH_CHECK(false, "kolo: source_rank() of a receive from any source that has not completed yet; wait() first");
}

}  // namespace kolo_torch
