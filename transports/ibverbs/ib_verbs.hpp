// Small owning wrappers around libibverbs objects, and the one way every verbs failure is
// reported: the call's name and errno's text.
#pragma once
#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <string>

namespace kolo::ib {

// "ibv_create_qp: Cannot allocate memory". `err` is the errno value (or the value the call
// returned, for the calls that return an errno instead of setting it).
std::string verbs_error(const char* call, int err);
// Throws kolo::Error("ibverbs transport: " + verbs_error(call, err) + context).
[[noreturn]] void throw_verbs_error(const char* call, int err, const std::string& context = "");

struct CloseDevice { void operator()(ibv_context* c) const { ibv_close_device(c); } };
struct DeallocPd { void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); } };
struct DestroyChannel { void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); } };
struct DestroyCq { void operator()(ibv_cq* c) const { ibv_destroy_cq(c); } };
struct DestroyQp { void operator()(ibv_qp* q) const { ibv_destroy_qp(q); } };
struct DeregMr { void operator()(ibv_mr* m) const { ibv_dereg_mr(m); } };
struct FreeDeviceList { void operator()(ibv_device** l) const { ibv_free_device_list(l); } };

using ContextPtr = std::unique_ptr<ibv_context, CloseDevice>;
using PdPtr = std::unique_ptr<ibv_pd, DeallocPd>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, DestroyChannel>;
using CqPtr = std::unique_ptr<ibv_cq, DestroyCq>;
using QpPtr = std::unique_ptr<ibv_qp, DestroyQp>;
using MrPtr = std::unique_ptr<ibv_mr, DeregMr>;
using DeviceListPtr = std::unique_ptr<ibv_device*, FreeDeviceList>;

// Page-aligned memory registered with `pd` once, for the lifetime of a pair: the staging and
// receive rings. (User buffers are never registered; see docs/RDMA.md.)
class RegisteredBuffer {
 public:
  RegisteredBuffer() = default;
  RegisteredBuffer(ibv_pd* pd, size_t bytes, int access, const std::string& what);
  char* data() const { return static_cast<char*>(mem_.get()); }
  size_t size() const { return bytes_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> mem_;
  size_t bytes_ = 0;
  MrPtr mr_;  // declared last: deregistered before the memory is freed
};

}  // namespace kolo::ib
