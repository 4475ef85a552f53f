#include "gloo_backend.hpp"

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/context.h>

#include <climits>
#include <cstring>
#include <stdexcept>

namespace kolo::peers {
namespace {

template <class T>
const gloo::ReductionFunction<T>* reduction(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum: return gloo::ReductionFunction<T>::sum;
    case ReduceKind::prod: return gloo::ReductionFunction<T>::product;
    case ReduceKind::min: return gloo::ReductionFunction<T>::min;
    case ReduceKind::max: return gloo::ReductionFunction<T>::max;
  }
  return gloo::ReductionFunction<T>::sum;
}

// Gloo counts are int: refuse what does not fit instead of wrapping.
int gloo_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw std::runtime_error("count " + std::to_string(count) + " does not fit Gloo's int count");
  return static_cast<int>(count);
}

template <class T>
std::shared_ptr<gloo::Algorithm> make_allreduce(const std::string& algorithm,
                                                const std::shared_ptr<gloo::Context>& context, T* data, int count,
                                                ReduceKind op) {
  const std::vector<T*> ptrs{data};
  const gloo::ReductionFunction<T>* fn = reduction<T>(op);
  if (algorithm == "ring") return std::make_shared<gloo::AllreduceRing<T>>(context, ptrs, count, fn);
  if (algorithm == "ring_chunked") return std::make_shared<gloo::AllreduceRingChunked<T>>(context, ptrs, count, fn);
  if (algorithm == "halving_doubling")
    return std::make_shared<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, count, fn);
  throw std::runtime_error("unknown Gloo algorithm '" + algorithm + "'");
}

const char* class_name(const std::string& algorithm) {
  if (algorithm == "ring_chunked") return "AllreduceRingChunked";
  if (algorithm == "halving_doubling") return "AllreduceHalvingDoubling";
  return "AllreduceRing";
}

}  // namespace

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, std::string algorithm, std::string transport_label)
    : context_(std::move(context)), algorithm_(std::move(algorithm)), transport_label_(std::move(transport_label)) {}

int GlooBackend::rank() const { return context_->rank; }
int GlooBackend::size() const { return context_->size; }

std::string GlooBackend::library() const {
  return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
         std::to_string(GLOO_VERSION_PATCH) + " " + class_name(algorithm_) + " over " + transport_label_;
}

void GlooBackend::barrier() {
  gloo::BarrierOptions opts(context_);
  opts.setTimeout(context_->getTimeout());
  gloo::barrier(opts);
}

double GlooBackend::reduce_double(double value, Combine how) {
  const ReduceKind kind = how == Combine::sum ? ReduceKind::sum : how == Combine::min ? ReduceKind::min : ReduceKind::max;
  double slot = value;
  gloo::AllreduceRing<double>(context_, {&slot}, 1, reduction<double>(kind)).run();
  return slot;
}

std::vector<char> GlooBackend::allgather_bytes(const std::vector<char>& mine) {
  std::vector<char> all(mine.size() * static_cast<size_t>(size()));
  gloo::AllgatherRing<char>(context_, {mine.data()}, all.data(), gloo_count(mine.size())).run();
  return all;
}

RunOnce GlooBackend::prepare(const RunRequest& r) {
  if (r.spec->id != CollId::allreduce)
    throw std::runtime_error(std::string("kolo-perf-gloo measures allreduce only, not ") + r.spec->name);
  const int count = gloo_count(r.shape.param_count);
  return with_element_type(r.type, [&](auto zero) -> RunOnce {
    using T = decltype(zero);
    auto* output = static_cast<T*>(r.where.recv);
    std::shared_ptr<gloo::Algorithm> algorithm = make_allreduce<T>(algorithm_, context_, output, count, r.op);
    if (r.in_place) return [algorithm] { algorithm->run(); };
    const void* input = r.where.send;
    const size_t bytes = r.shape.param_count * sizeof(T);
    return [algorithm, input, output, bytes] {
      std::memcpy(output, input, bytes);
      algorithm->run();
    };
  });
}

}  // namespace kolo::peers
