"""kolo backend for torch.distributed.

``import kolo_torch`` registers the backend "kolo"; then
``torch.distributed.init_process_group("kolo", ...)`` and ``new_group(..., backend="kolo")``
run every torch.distributed operation on CPU tensors through kolo, and DDP runs unchanged.
CUDA tensors too where kolo_torch was compiled against a torch with CUDA (``_C.cuda``): each
operation on one device, ordered on torch's current stream, its Work and future stream-ordered
as with NCCL (wait() makes the current stream wait; the future completes after the GPU copies).
Lose a rank, keep training: ``kolo_torch.shrink`` (the survivors re-form the group),
``kolo_torch.grow`` (the members let replacements in) and ``kolo_torch.join`` (a replacement's
way in, instead of init_process_group).
"""
import inspect

import torch  # loads libtorch and the pybind11 types (Store, ProcessGroup, Work) _C converts to
import torch.distributed as dist

from . import _build_info
from . import _guard

# Before _C: under another torch than the one _C was compiled against, one clear ImportError
# (which torch it needs, the command that rebuilds it) instead of an undefined symbol.
_guard.check(_build_info, torch)

from . import _C  # noqa: E402
from . import _libuv
from ._shrink import shrink  # noqa: E402
from ._grow import grow, join  # noqa: E402

__all__ = ["create_backend", "shrink", "grow", "join"]


def create_backend(store, rank, size, timeout):
    """The creator torch calls with the group's (prefixed) store, rank, size and timeout.

    While no default group exists this is the world's backend; afterwards it is a subgroup's
    (new_group), which gets this rank's world rank so that with KOLO_SPLIT_SHARE=1 it can run on
    the world's connections instead of opening its own."""
    world_rank = dist.get_rank() if dist.is_initialized() else -1
    return _C.create_backend(store, rank, size, timeout, world_rank)


def _register():
    if "KOLO" in dist.Backend._plugins:  # imported twice (e.g. reloaded): already registered
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        # torch 2.x: the device types the backend serves (one backend object for both: torch's
        # ProcessGroup hands it CPU and CUDA tensors alike). "cuda" even where _C was built
        # without CUDA: a CUDA tensor then gets kolo's error saying so, not torch's "no backend
        # for cuda". "cpu" first: the device torch picks for object collectives and barrier.
        dist.Backend.register_backend("kolo", create_backend, devices=["cpu", "cuda"])
    else:
        # torch 1.13: one ProcessGroup serves every device; it takes no device list.
        dist.Backend.register_backend("kolo", create_backend)


_register()
# A torch 2.x built without libuv (Debian's) cannot join torchrun's agent store otherwise.
_libuv.apply()
