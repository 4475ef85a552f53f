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

using bench::ElementType;
using bench::RedOp;

// Calls f(T{}) with the C++ type of t (the command line refuses half and bfloat16).
template <class F>
decltype(auto) with_native_type(ElementType t, F&& f) {
  switch (t) {
    case ElementType::int8: return f(static_cast<signed char>(0));
    case ElementType::uint8: return f(static_cast<unsigned char>(0));
    case ElementType::int32: return f(static_cast<int>(0));
    case ElementType::uint32: return f(static_cast<unsigned int>(0));
    case ElementType::int64: return f(static_cast<long long>(0));
    case ElementType::uint64: return f(static_cast<unsigned long long>(0));
    case ElementType::float32: return f(static_cast<float>(0));
    case ElementType::float64: return f(static_cast<double>(0));
    case ElementType::float16:
    case ElementType::bfloat16: break;
  }
  throw std::runtime_error(std::string("Gloo has no ") + bench::element_name(t));
}

template <class T>
const gloo::ReductionFunction<T>* reduction(RedOp op) {
  switch (op) {
    case RedOp::sum: return gloo::ReductionFunction<T>::sum;
    case RedOp::prod: return gloo::ReductionFunction<T>::product;
    case RedOp::min: return gloo::ReductionFunction<T>::min;
    case RedOp::max: return gloo::ReductionFunction<T>::max;
    default: break;  // refused by the command line: kolo-only operators
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
                                                RedOp op) {
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

double GlooBackend::reduce_double(double value, bench::Combine how) {
  const RedOp kind = how == bench::Combine::sum ? RedOp::sum : how == bench::Combine::min ? RedOp::min : RedOp::max;
  double slot = value;
  gloo::AllreduceRing<double>(context_, {&slot}, 1, reduction<double>(kind)).run();
  return slot;
}

std::vector<char> GlooBackend::allgather_bytes(const std::vector<char>& mine) {
  std::vector<char> all(mine.size() * static_cast<size_t>(size()));
  gloo::AllgatherRing<char>(context_, {mine.data()}, all.data(), gloo_count(mine.size())).run();
  return all;
}

std::unique_ptr<bench::PreparedRun> GlooBackend::prepare(const bench::RunRequest& r) {
  if (r.spec->id != bench::CollId::allreduce)
    throw std::runtime_error(std::string("kolo-perf-gloo measures allreduce only, not ") + r.spec->name);
  const int count = gloo_count(r.shape.param_count);
  return with_native_type(r.type, [&](auto zero) -> std::unique_ptr<bench::PreparedRun> {
    using T = decltype(zero);
    auto* output = static_cast<T*>(r.where.recv);
    std::shared_ptr<gloo::Algorithm> algorithm = make_allreduce<T>(algorithm_, context_, output, count, r.op);
    if (r.in_place) return bench::blocking_run([algorithm] { algorithm->run(); });
    const void* input = r.where.send;
    const size_t bytes = r.shape.param_count * sizeof(T);
    return bench::blocking_run([algorithm, input, output, bytes] {
      std::memcpy(output, input, bytes);
      algorithm->run();
    });
  });
}

}  // namespace kolo::peers
