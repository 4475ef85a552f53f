// The Python module kolo_torch._C: the function that makes the backend from what torch's
// init_process_group / new_group hand a registered backend's creator, and shrink.
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
