// Scenarios "average", "no-sync" and "overlap": gradients after finish() equal the element-wise
// mean over ranks of what each rank produced, whatever the mark order; no_sync accumulates
// locally; a bucket's all-reduce runs before finish() is called.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>

#include "test_model.hpp"
#include "worker.hpp"

namespace kolo::ddptest {
namespace {

constexpr float kTail = 1000.0f;  // elements outside every parameter, which DDP must not touch

struct Model {
  std::vector<DdpParam> layout = model_layout();
  size_t total = model_total(layout);
  std::vector<uint8_t> covered = covered_elements(layout, total);
  std::vector<float> params = std::vector<float>(total);
  std::vector<float> grads = std::vector<float>(total, 0.0f);
  int world = 1;
  int rank = 0;

  explicit Model(const ProcessGroup& g) : world(g.size()), rank(g.rank()) {
    for (size_t i = 0; i < total; ++i) params[i] = initial_param(rank, i);
  }
  // What a backward pass does: add this step's gradient (the tail gets a rank-specific marker).
  void backward_adds(int step) {
    for (size_t i = 0; i < total; ++i) grads[i] = covered[i] ? grads[i] + exact_grad(rank, i, step) : kTail + rank;
  }
  void zero_grads() { std::fill(grads.begin(), grads.end(), 0.0f); }
  // Compares every parameter element with the mean over ranks of the gradients of `steps`.
  void expect_mean(Worker& w, const std::vector<int>& steps, const char* what) const {
    size_t wrong = 0;
    for (size_t i = 0; i < total; ++i) {
      const bool in_tail = i >= layout.back().offset + layout.back().count;
      if (!covered[i] && !in_tail) continue;  // padding gaps are averaged too; nothing to assert
      const float want = in_tail ? kTail + rank : reference_mean(exact_grad, world, i, steps);
      if (grads[i] != want && ++wrong <= 3)
        w.expect(false, std::string(what) + ": grads[" + std::to_string(i) + "] = " + std::to_string(grads[i]) +
                            ", expected " + std::to_string(want));
    }
    w.expect(wrong == 0, std::string(what) + ": " + std::to_string(wrong) + " wrong elements");
  }
};

// How many buckets the reducer may have launched once the parameters in `marked` are marked:
// the leading run of buckets whose parameters are all marked (launches go in bucket order).
size_t expected_launched(const std::vector<DdpBucket>& buckets, const std::vector<uint8_t>& marked) {
  size_t k = 0;
  while (k < buckets.size() &&
         std::all_of(buckets[k].params.begin(), buckets[k].params.end(), [&](size_t p) { return marked[p] != 0; }))
    ++k;
  return k;
}

// Marks parameters in `order`, checking after each mark that exactly the right buckets started.
void mark_in_order(Worker& w, DistributedDataParallel& ddp, const std::vector<size_t>& order, size_t nparams) {
  std::vector<uint8_t> marked(nparams, 0);
  for (size_t p : order) {
    ddp.mark_grad_ready(p);
    marked[p] = 1;
    const size_t want = expected_launched(ddp.buckets(), marked);
    if (ddp.launched_buckets() != want) {
      w.expect(false, "after marking #" + std::to_string(p) + ": " + std::to_string(ddp.launched_buckets()) +
                          " buckets launched, expected " + std::to_string(want));
      return;
    }
  }
}

uint64_t plan_hash(const std::vector<DdpBucket>& buckets) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const DdpBucket& b : buckets) {
    mix(b.offset);
    mix(b.count);
    for (size_t p : b.params) mix(p);
  }
  return h;
}

void expect_stats(Worker& w, const DistributedDataParallel& ddp, size_t wire_bytes_per_element) {
  const auto s = ddp.last_step_stats();
  size_t bytes = 0;
  for (const DdpBucket& b : ddp.buckets()) bytes += b.count * wire_bytes_per_element;
  w.expect(s.buckets == ddp.bucket_count(), "stats.buckets = " + std::to_string(s.buckets));
  w.expect(s.bytes == bytes, "stats.bytes = " + std::to_string(s.bytes) + ", expected " + std::to_string(bytes));
  w.expect(s.comm_seconds > 0 && s.comm_seconds < 60, "stats.comm_seconds = " + std::to_string(s.comm_seconds));
  w.expect(s.exposed_wait_seconds >= 0 && s.exposed_wait_seconds < 60,
           "stats.exposed_wait_seconds = " + std::to_string(s.exposed_wait_seconds));
  w.expect(ddp.launched_buckets() == 0, "finish() did not reset the step");
}

}  // namespace

void scenario_average(Worker& w) {
  ProcessGroup& g = *w.group;
  Model m(g);
  DistributedDataParallel ddp(w.group, m.params.data(), m.grads.data(), m.total, m.layout, model_options());

  w.begin("params broadcast from rank 0");
  size_t wrong = 0;
  for (size_t i = 0; i < m.total; ++i) wrong += m.params[i] != initial_param(0, i);
  w.expect(wrong == 0, std::to_string(wrong) + " parameters differ from rank 0's");

  w.begin("bucket plan identical on every rank");
  w.expect(ddp.bucket_count() >= 3, "only " + std::to_string(ddp.bucket_count()) + " buckets");
  const uint64_t mine = plan_hash(ddp.buckets());
  std::vector<uint64_t> all(static_cast<size_t>(g.size()));
  g.allgather(Buffer(&mine, 1), Buffer(all.data(), all.size()))->wait(std::chrono::seconds(30));
  for (int r = 0; r < g.size(); ++r) w.expect(all[static_cast<size_t>(r)] == mine, "rank " + std::to_string(r) + "'s plan differs");

  const size_t n = m.layout.size();
  std::vector<size_t> backward(n), forward(n), shuffled(n);
  std::iota(forward.begin(), forward.end(), size_t{0});
  std::reverse_copy(forward.begin(), forward.end(), backward.begin());
  shuffled = forward;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(1234u + static_cast<unsigned>(g.rank())));

  struct Step {
    const char* name;
    const std::vector<size_t>* order;  // null: finish() marks everything
  };
  const Step steps[] = {{"backward order", &backward},
                        {"forward order (buckets complete last-first)", &forward},
                        {"a different random order on every rank", &shuffled},
                        {"no marks: finish() marks everything", nullptr}};
  int step = 0;
  for (const Step& s : steps) {
    w.begin(s.name);
    m.zero_grads();
    m.backward_adds(step);
    if (s.order != nullptr) mark_in_order(w, ddp, *s.order, n);
    ddp.finish();
    m.expect_mean(w, {step}, s.name);
    expect_stats(w, ddp, sizeof(float));
    ++step;
  }

  w.begin("bad marks are refused");
  m.zero_grads();
  m.backward_adds(step);
  ddp.mark_grad_ready(0);
  bool twice = false, outside = false;
  try {
    ddp.mark_grad_ready(0);
  } catch (const InvalidArgument&) {
    twice = true;
  }
  try {
    ddp.mark_grad_ready(n);
  } catch (const InvalidArgument&) {
    outside = true;
  }
  w.expect(twice, "marking a parameter twice in one step was accepted");
  w.expect(outside, "marking a parameter outside the layout was accepted");
  ddp.finish();
  m.expect_mean(w, {step}, "after refused marks");
}

void scenario_no_sync(Worker& w) {
  Model m(*w.group);
  DistributedDataParallel ddp(w.group, m.params.data(), m.grads.data(), m.total, m.layout, model_options());
  const size_t n = m.layout.size();

  w.begin("two accumulated steps, then a synced one");
  m.zero_grads();
  {
    DistributedDataParallel::NoSync outer = ddp.no_sync();
    DistributedDataParallel::NoSync moved = std::move(outer);  // still one live scope
    for (int step = 0; step < 2; ++step) {
      m.backward_adds(step);
      for (size_t p = n; p-- > 0;) ddp.mark_grad_ready(p);
      w.expect(ddp.launched_buckets() == 0, "a bucket was launched inside no_sync");
      ddp.finish();
      w.expect(ddp.last_step_stats().buckets == 0, "a no_sync step reports communication");
    }
    size_t wrong = 0;  // still this rank's own sums
    for (size_t i = 0; i < m.total; ++i)
      if (m.covered[i]) wrong += m.grads[i] != exact_grad(m.rank, i, 0) + exact_grad(m.rank, i, 1);
    w.expect(wrong == 0, std::to_string(wrong) + " gradients changed inside no_sync");
  }
  m.backward_adds(2);
  for (size_t p = n; p-- > 0;) ddp.mark_grad_ready(p);
  ddp.finish();
  m.expect_mean(w, {0, 1, 2}, "mean of the accumulated sums");
  expect_stats(w, ddp, sizeof(float));

  w.begin("no_sync() in the middle of a step is refused");
  m.zero_grads();
  m.backward_adds(3);
  ddp.mark_grad_ready(n - 1);
  bool refused = false;
  try {
    auto guard = ddp.no_sync();
  } catch (const InvalidArgument&) {
    refused = true;
  }
  w.expect(refused, "no_sync() after a mark was accepted");
  ddp.finish();
  m.expect_mean(w, {3}, "the step still communicates");
}

void scenario_overlap(Worker& w) {
  Model m(*w.group);
  DistributedDataParallel ddp(w.group, m.params.data(), m.grads.data(), m.total, m.layout, model_options());

  w.begin("the first bucket's all-reduce completes without finish()");
  m.zero_grads();
  m.backward_adds(0);
  const DdpBucket first = ddp.buckets().front();
  for (size_t p : first.params) ddp.mark_grad_ready(p);
  w.expect(ddp.launched_buckets() == 1, std::to_string(ddp.launched_buckets()) + " buckets launched, expected 1");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ddp.completed_buckets() < 1 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  w.expect(ddp.completed_buckets() == 1, "the first bucket did not complete within 20 s without finish()");
  // Gradient-as-bucket-view: the averaged values are already in grads.
  size_t wrong = 0;
  for (size_t i = first.offset; i < first.offset + first.count; ++i)
    if (m.covered[i]) wrong += m.grads[i] != reference_mean(exact_grad, m.world, i, {0});
  w.expect(wrong == 0, std::to_string(wrong) + " elements of the first bucket are not averaged before finish()");

  for (size_t p = 0; p < m.layout.size(); ++p)
    if (std::find(first.params.begin(), first.params.end(), p) == first.params.end()) ddp.mark_grad_ready(p);
  ddp.finish();
  m.expect_mean(w, {0}, "whole model after finish()");
  expect_stats(w, ddp, sizeof(float));

  w.begin("the destructor waits for buckets in flight");
  Model other(*w.group);
  other.backward_adds(1);
  {
    DistributedDataParallel second(w.group, other.params.data(), other.grads.data(), other.total, other.layout,
                                   model_options());
    for (size_t p = other.layout.size(); p-- > 0;) second.mark_grad_ready(p);
  }  // no finish(): every bucket was launched on every rank, so they complete and are waited for
  other.expect_mean(w, {1}, "after the destructor");
  w.group->barrier()->wait(std::chrono::seconds(30));  // and the group is still healthy
}

}  // namespace kolo::ddptest
