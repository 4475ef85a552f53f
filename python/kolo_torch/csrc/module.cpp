// The Python module kolo_torch._C: the function that makes the backend from what torch's
// init_process_group / new_group hand a registered backend's creator, shrink, grow and join.
#include <chrono>
#include <optional>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // c10::intrusive_ptr as a pybind11 holder (torch's types)

#include "backend.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "kolo collective-communication backend for torch.distributed";
  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
         int world_rank) -> c10::intrusive_ptr<kolo_torch::BackendBase> {
        return c10::make_intrusive<kolo_torch::ProcessGroupKolo>(store, rank, size, timeout, world_rank);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("world_rank") = -1,
      // Connecting waits for every peer: other Python threads (torch's store) must run meanwhile.
      py::call_guard<py::gil_scoped_release>(),
      "Connects this rank to the group through `store` and returns the torch backend object.");
  m.def(
      "shrink",
      [](const c10::intrusive_ptr<kolo_torch::BackendBase>& backend, std::optional<std::vector<int>> exclude,
         std::chrono::milliseconds timeout) -> std::pair<c10::intrusive_ptr<kolo_torch::BackendBase>, std::vector<int>> {
        auto* kolo = dynamic_cast<kolo_torch::ProcessGroupKolo*>(backend.get());
        TORCH_CHECK(kolo != nullptr, "kolo_torch.shrink: the group's backend is ", backend->getBackendName(),
                    ", not kolo");
        auto s = kolo->shrink_survivors(exclude, timeout);
        return {s.backend, s.members};
      },
      py::arg("backend"), py::arg("exclude"), py::arg("timeout"),
      // The survivors wait for one another through the store and then connect.
      py::call_guard<py::gil_scoped_release>(),
      "Shrinks a kolo backend (kolo_torch.shrink): (the survivors' backend, their ranks in the old group).");
  m.def(
      "grow",
      [](const c10::intrusive_ptr<kolo_torch::BackendBase>& backend, std::chrono::milliseconds wait, int max_joiners,
         std::chrono::milliseconds timeout) -> c10::intrusive_ptr<kolo_torch::BackendBase> {
        auto* kolo = dynamic_cast<kolo_torch::ProcessGroupKolo*>(backend.get());
        TORCH_CHECK(kolo != nullptr, "kolo_torch.grow: the group's backend is ", backend->getBackendName(),
                    ", not kolo");
        kolo::GrowOptions o;
        o.wait = wait;
        o.max_joiners = max_joiners;
        o.timeout = timeout;
        return kolo->grow_members(o);  // null (None) when nobody was waiting
      },
      py::arg("backend"), py::arg("wait"), py::arg("max_joiners"), py::arg("timeout"),
      // Rank 0 may wait for a joiner; then members and joiners connect.
      py::call_guard<py::gil_scoped_release>(),
      "Grows a kolo backend (kolo_torch.grow): the grown backend, or None when nobody joined.");
  m.def(
      "join",
      [](const c10::intrusive_ptr<c10d::Store>& store, std::chrono::milliseconds timeout,
         std::chrono::milliseconds wait) -> c10::intrusive_ptr<kolo_torch::BackendBase> {
        return kolo_torch::ProcessGroupKolo::join_world(store, timeout, wait);
      },
      py::arg("store"), py::arg("timeout"), py::arg("wait"),
      // Waits in the store's queue until the members admit this process, then connects.
      py::call_guard<py::gil_scoped_release>(),
      "Joins a running kolo world as a replacement (kolo_torch.join): its backend.");
  m.def(
      "generation",
      [](const c10::intrusive_ptr<kolo_torch::BackendBase>& backend) {
        auto* kolo = dynamic_cast<kolo_torch::ProcessGroupKolo*>(backend.get());
        TORCH_CHECK(kolo != nullptr, "kolo_torch: the group's backend is ", backend->getBackendName(), ", not kolo");
        return kolo->generation();
      },
      py::arg("backend"), "The generation of a kolo backend's group (0 at launch, +1 per shrink or grow).");
#ifdef KOLO_TORCH_BACKEND_SHRINK
  m.attr("backend_shrink_hook") = true;
#else
  m.attr("backend_shrink_hook") = false;
#endif
  m.attr("torch_version_built") = TORCH_VERSION;
  // Whether CUDA tensors are served (compiled with KOLO_TORCH_CUDA, against a torch with CUDA).
#ifdef KOLO_TORCH_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
