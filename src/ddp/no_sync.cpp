// DistributedDataParallel::NoSync: a scope in which gradients accumulate locally.
#include "ddp/ddp_impl.hpp"
#include "kolo/error.hpp"

namespace kolo {

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() {
  // Entering mid-step would leave buckets half counted; gradient accumulation enters between steps.
  if (impl_->no_sync_depth == 0 && impl_->marks_this_step > 0)
    throw InvalidArgument("kolo: DistributedDataParallel::no_sync() called in the middle of a step (after "
                          "mark_grad_ready, before finish())");
  ++impl_->no_sync_depth;
  return NoSync(this);
}

DistributedDataParallel::NoSync::NoSync(NoSync&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }

DistributedDataParallel::NoSync& DistributedDataParallel::NoSync::operator=(NoSync&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

DistributedDataParallel::NoSync::~NoSync() { release(); }

void DistributedDataParallel::NoSync::release() noexcept {
  if (owner_ != nullptr) --owner_->impl_->no_sync_depth;
  owner_ = nullptr;
}

}  // namespace kolo
