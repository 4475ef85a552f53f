#include "transports/cuda_ipc/ipc_algo.hpp"

#include "kolo/error.hpp"

namespace kolo::cuda_ipc {

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::kOneShot: return "one-shot";
    case Algo::kTwoShot: return "two-shot";
    case Algo::kTwoShotPush: return "two-shot-push";
    case Algo::kLeaderPush: return "leader-push";
    case Algo::kRing: return "ring";
  }
  return "?";
}

std::optional<Algo> algo_by_name(const std::string& name, const char* what) {
  if (name.empty() || name == "auto") return std::nullopt;
  for (Algo a : kAllAlgos)
    if (name == algo_name(a)) return a;
  throw InvalidArgument(std::string(what) + "=" + name +
                        ": not a CUDA IPC all-reduce algorithm; expected auto, one-shot, two-shot, two-shot-push, "
                        "leader-push or ring");
}

const char* ordering_name(Ordering o) {
  switch (o) {
    case Ordering::events: return "events";
    case Ordering::flags: return "flags";
    case Ordering::host: return "host";
  }
  return "?";
}

}  // namespace kolo::cuda_ipc
