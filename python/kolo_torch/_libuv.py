"""torch 2.x built without libuv (Debian's python3-torch): make TCPStore's default server the
classic one, so that torchrun and init_process_group work at all.

torch 2.x's TCPStore asks for libuv unless told use_libuv=False, and several of torch's own
callers never tell it: torchrun's rendezvous handlers (static, c10d, dynamic) in the agent, and
env://'s join of the agent's store (TORCHELASTIC_USE_AGENT_STORE) in every worker. On a torch
built without libuv each of them fails with "use_libuv was requested but PyTorch was built
without libuv support", whatever USE_LIBUV says. Where (and only where) that is so, those
modules get a TCPStore whose use_libuv defaults to False, and USE_LIBUV defaults to 0 (which
env://, tcp:// and torch.distributed.elastic honour). Everywhere else this does nothing.
"""
import importlib
import os

import torch.distributed as dist

# The modules whose module-level TCPStore name torch's callers above use.
_USERS = ("torch.distributed.rendezvous",
          "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
          "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend")


def libuv_missing():
    """True where this torch's TCPStore has a libuv option it cannot honour."""
    if not hasattr(dist, "TCPStore") or not hasattr(dist.TCPStore, "libuvBackend"):
        return False  # torch < 2.2: no libuv option at all
    try:  # a throw-away server on an ephemeral loopback port
        dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False, use_libuv=True)
    except RuntimeError as e:  # DistStoreError derives from RuntimeError
        return "libuv" in str(e)
    return False


def apply():
    if getattr(dist.TCPStore, "_kolo_classic_default", False) or not libuv_missing():
        return

    class ClassicTCPStore(dist.TCPStore):
        """TCPStore whose server defaults to the classic (non-libuv) one."""
        _kolo_classic_default = True

        def __init__(self, *args, use_libuv=False, **kwargs):
            super().__init__(*args, use_libuv=use_libuv, **kwargs)

    for name in _USERS:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "TCPStore"):
            mod.TCPStore = ClassicTCPStore
    dist.TCPStore = ClassicTCPStore  # dynamic_rendezvous constructs dist.TCPStore
    os.environ.setdefault("USE_LIBUV", "0")
