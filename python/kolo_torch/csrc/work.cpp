#include "work.hpp"

#include <optional>
#include <thread>

#include <ATen/core/jit_type.h>

#ifdef KOLO_TORCH_CUDA
#include <c10/core/Event.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "errors.hpp"
#include "kolo/error.hpp"

namespace kolo_torch {

namespace {
// torch's "no timeout" is 0 ms (and c10d passes -1 for "unset"); kolo's is kNoTimeout (-1 ms).
std::chrono::milliseconds kolo_timeout(std::chrono::milliseconds t) {
  return t.count() > 0 ? t : kolo::Work::kNoTimeout;
}

#ifdef KOLO_TORCH_CUDA
// A CUDA operation's GPU side, as this Work sees it.
struct CudaSide {
  c10::DeviceIndex index;
  // Where the result is finished: it waits for kolo's copies back, runs the finish step's
  // copies, and the future's events are recorded on it.
  c10::cuda::CUDAStream side;
  // Recorded on `side` at issue, once all of the above is queued there: the operation's end on
  // the GPU.
  c10::Event done{c10::DeviceType::CUDA};
  explicit CudaSide(c10::DeviceIndex i) : index(i), side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, i)) {}
};

// Tells torch's caching allocator that `ts` are used on `stream` until what is queued there now
// has run: their memory is not handed out again before (they were allocated on the issuing
// stream, and kolo's copies and the finish step use them on others).
void record_on(const std::vector<at::Tensor>& ts, const c10::cuda::CUDAStream& stream) {
  for (const auto& t : ts)
    if (t.defined() && t.is_cuda() && t.has_storage())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
}
#endif
}  // namespace

struct KoloWork::State {
  std::mutex mu;
  std::condition_variable cv;
  size_t remaining = 0;
  bool done = false;
  std::exception_ptr error;
  std::function<void()> finish;
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> keep;
  // Made by getFuture() (or at issue for a CUDA operation): a blocking dist.all_reduce never
  // asks for it, and making and completing one per call is a good part of kolo_torch's own cost
  // per call. Whichever of part_done() and getFuture() finds the other done completes it.
  c10::intrusive_ptr<c10::ivalue::Future> future;

  // The future's value type, made once (ListType::create allocates and hashes).
  static const c10::TypePtr& tensor_list() {
    static const c10::TypePtr t = c10::ListType::create(c10::TensorType::get());
    return t;
  }

  // Completes `f` with this operation's result (its error, or `outputs`).
  void complete(const c10::intrusive_ptr<c10::ivalue::Future>& f, const std::exception_ptr& err) {
    try {
      if (err)
        f->setError(err);
      else
        f->markCompleted(c10::IValue(outputs));
    } catch (...) {  // e.g. refused by the future
      f->setErrorIfNeeded(std::current_exception());
    }
  }

#ifdef KOLO_TORCH_CUDA
  std::unique_ptr<CudaSide> cuda;  // set for an operation on CUDA tensors
#endif

  // One part completed (on kolo's completing thread, or the issuing thread for `w` null: the
  // extra count start() releases); the last one finishes the operation. For a CUDA operation
  // only its host side ends here: its GPU side was all queued at issue (start()), since this
  // may run on kolo's engine thread, which must make no CUDA call (a caller blocked in a
  // synchronous CUDA call could hold it up: docs/ARCHITECTURE.md, "Device memory").
  void part_done(kolo::Work* w, std::exception_ptr part_error) {
    (void)w;
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (!error && part_error) error = for_torch(part_error);  // "Timed out" as c10d says it
      if (--remaining > 0) return;
      fn = std::move(finish);
#ifdef KOLO_TORCH_CUDA
      if (cuda) {
        done = true;
        keep.clear();  // recorded on the side stream at issue: the allocator waits for it
      }
#endif
    }
#ifdef KOLO_TORCH_CUDA
    if (cuda) {
      cv.notify_all();
      return;
    }
#endif
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
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    {
      std::lock_guard<std::mutex> lk(mu);
      error = err;
      done = true;
      keep.clear();
      fut = future;  // null: getFuture() completes the one it makes
    }
    fn = nullptr;
    cv.notify_all();
    // Outside the lock: the future's callbacks (Python then()) run here.
    if (fut) complete(fut, err);
  }
};

KoloWork::KoloWork(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts, std::shared_ptr<State> state)
    : c10d::Work(rank, type), parts_(std::move(parts)), state_(std::move(state)) {}

c10::intrusive_ptr<KoloWork> KoloWork::start(int rank, c10d::OpType type, std::vector<kolo::WorkPtr> parts,
                                             std::vector<at::Tensor> outputs, std::function<void()> finish,
                                             std::vector<at::Tensor> keep, OpDevice device) {
  auto st = std::make_shared<State>();
  st->remaining = parts.size() + 1;  // +1: released below, after every callback is registered
  st->finish = std::move(finish);
  st->outputs = std::move(outputs);
  st->keep = std::move(keep);
  std::vector<c10::Device> future_devices;
#ifdef KOLO_TORCH_CUDA
  if (device.cuda) {
    st->cuda = std::make_unique<CudaSide>(device.index);
    future_devices.emplace_back(c10::DeviceType::CUDA, device.index);
  }
#else
  TORCH_CHECK(!device.cuda, "kolo: this kolo_torch was built without CUDA");
#endif
  if (!future_devices.empty())
    st->future = c10::make_intrusive<c10::ivalue::Future>(State::tensor_list(), std::move(future_devices));
  auto work = c10::make_intrusive<KoloWork>(rank, type, std::move(parts), st);
#ifdef KOLO_TORCH_CUDA
  if (st->cuda) {
    // The whole GPU side, now, on this thread (as ProcessGroupNCCL does): the side stream waits
    // for kolo's copies back (a flag wait on the GPU), runs the finish step's copies, and the
    // future completes at once with its events there, so DDP's hooks and then() are ordered
    // after the result on the GPU. Errors surface at wait(), synchronize() and the next call.
    CudaSide& cu = *st->cuda;
    c10::cuda::CUDAGuard guard(cu.index);
    for (auto& p : work->parts_) p->wait_stream(cu.side.stream());
    c10::cuda::CUDAStreamGuard on_side(cu.side);
    if (st->finish) {
      auto fn = std::move(st->finish);
      st->finish = nullptr;
      fn();
    }
    record_on(st->outputs, cu.side);
    record_on(st->keep, cu.side);
    cu.done.record(cu.side);
    st->future->markCompleted(c10::IValue(st->outputs));
  }
#endif
  for (auto& p : work->parts_) p->on_complete([st](kolo::Work& w) { st->part_done(&w, w.exception()); });
  // The extra count: an operation with no kolo part (nothing to move) completes here.
  st->part_done(nullptr, nullptr);
  return work;
}

c10::intrusive_ptr<KoloWork> KoloWork::join(int rank, c10d::OpType type,
                                            const std::vector<c10::intrusive_ptr<KoloWork>>& works,
                                            std::vector<at::Tensor> outputs) {
  std::vector<kolo::WorkPtr> parts;
  std::vector<std::shared_ptr<State>> states;
  OpDevice device;
  for (const auto& w : works) {
    parts.insert(parts.end(), w->parts_.begin(), w->parts_.end());
    states.push_back(w->state_);
#ifdef KOLO_TORCH_CUDA
    if (w->state_->cuda) {
      device.cuda = true;
      device.index = w->state_->cuda->index;
    }
#endif
  }
  // Runs after the last part's callbacks, which were registered (and so run) before this join's:
  // every sub-work has finished by then, and this only collects their errors (and, on CUDA,
  // makes this Work's side stream, current here, wait for theirs: this finish step counts as GPU
  // work, so wait() on a joined CUDA Work waits for the host side first).
  return start(rank, type, std::move(parts), std::move(outputs), [states] {
    for (const auto& st : states) {
      std::lock_guard<std::mutex> lk(st->mu);
      if (st->error) std::rethrow_exception(st->error);
#ifdef KOLO_TORCH_CUDA
      if (st->cuda) st->cuda->done.block(c10::cuda::getCurrentCUDAStream(st->cuda->index));
#endif
    }
  }, {}, device);
}

bool KoloWork::isCompleted() {
  // kolo's is_completed() also tells its engine that someone polls, so a queued part starts
  // on the engine thread instead of waiting for a waiter to run it.
  for (auto& p : parts_) p->is_completed();
  std::lock_guard<std::mutex> lk(state_->mu);
#ifdef KOLO_TORCH_CUDA
  // A CUDA operation: once its result is in device memory (the end event covers kolo's copies
  // back, which the side stream waited for, and the finish step's).
  if (state_->cuda && state_->done && !state_->error) return state_->cuda->done.query();
#endif
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
#ifdef KOLO_TORCH_CUDA
  if (state_->cuda) return wait_device(timeout);
#endif
  // kolo::Work::wait runs a still-queued operation on this thread (no hand-off to the engine
  // thread), so waiting on the parts, not only on the state, matters for latency.
  const auto t = kolo_timeout(timeout);
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
      std::rethrow_exception(for_torch(std::current_exception()));  // the caller's wait ran out
    } catch (...) {
      // The part's error; rethrown below once the finish step and future are settled.
    }
  }
  std::unique_lock<std::mutex> lk(state_->mu);
  state_->cv.wait(lk, [&] { return state_->done; });  // callbacks have run once the parts' wait returned
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

bool KoloWork::wait_device(std::chrono::milliseconds timeout) {
#ifdef KOLO_TORCH_CUDA
  // torch's current stream waits for the operation's end on the GPU (its side stream's event,
  // queued at issue), without blocking the host, as WorkNCCL::wait does; an error already known
  // is thrown. `timeout` bounds nothing here: kolo's own timeout fails a stuck operation.
  (void)timeout;
  auto& cu = *state_->cuda;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->error) std::rethrow_exception(state_->error);
  }
  cu.done.block(c10::cuda::getCurrentCUDAStream(cu.index));
  return true;
#else
  (void)timeout;
  return true;
#endif
}

void KoloWork::synchronize() {
#ifdef KOLO_TORCH_CUDA
  if (!state_->cuda) return;
  // Blocks the host until the result is in device memory: kolo's copies back, then the finish
  // step's on the side stream.
  for (auto& p : parts_) {
    try {
      p->synchronize();
    } catch (...) {
      // The operation's error: rethrown below once the Work is settled.
    }
  }
  {
    std::unique_lock<std::mutex> lk(state_->mu);
    state_->cv.wait(lk, [&] { return state_->done; });
    if (state_->error) std::rethrow_exception(state_->error);
  }
  while (!state_->cuda->done.query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
#endif
}

c10::intrusive_ptr<c10::ivalue::Future> KoloWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->future) return state_->future;
    state_->future = c10::make_intrusive<c10::ivalue::Future>(State::tensor_list());
    if (!state_->done) return state_->future;  // part_done() completes it
    fut = state_->future;
    err = state_->error;
  }
  state_->complete(fut, err);
  return fut;
}

std::vector<at::Tensor> KoloWork::result() { return state_->outputs; }

int KoloWork::sourceRank() const {
  if (opType_ != c10d::OpType::RECV && opType_ != c10d::OpType::RECVANYSOURCE) return c10d::Work::sourceRank();
  if (parts_.size() == 1 && parts_[0]->source_rank() >= 0) return parts_[0]->source_rank();
  if (source_ >= 0) return source_;
  TORCH_CHECK(false, "kolo: source_rank() of a receive from any source that has not completed yet; wait() first");
}

}  // namespace kolo_torch
