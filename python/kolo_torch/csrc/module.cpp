// The Python module kolo_torch._C: one function that makes the backend from what torch's
// init_process_group / new_group hand a registered backend's creator.
#include <chrono>

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
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
  m.attr("torch_version_built") = TORCH_VERSION;
  // Whether CUDA tensors are served (compiled with KOLO_TORCH_CUDA, against a torch with CUDA).
#ifdef KOLO_TORCH_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
