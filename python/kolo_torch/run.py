"""torchrun (torch.distributed.run), usable on Debian's torch: 1.13 on Python 3.11 (Debian 12)
and 2.x built without libuv (Debian forky/trixie).

torch 1.13's Std.from_str looks the value up by iterating the Std flag enum, and since Python
3.11 that iteration skips NONE (0) and ALL (3): torchrun's default "--redirects 0 --tee 0"
then fails with "'NoneType' object has no attribute 'get'". This converts the value with Std()
instead.

torch 2.x's TCPStore asks for the libuv server by default, and the rendezvous handlers that
torchrun's agent uses (static, c10d, dynamic) construct it without use_libuv, ignoring
USE_LIBUV: a torch built without libuv (Debian's) then fails at start with "use_libuv was
requested but PyTorch was built without libuv support". Where that is so, those handlers get a
TCPStore whose default is the classic server, and the workers inherit USE_LIBUV=0 (which
torch's env:// rendezvous honours).

Everything else goes to torch.distributed.run unchanged:

    /usr/bin/python3 -m kolo_torch.run --nproc_per_node 2 examples/torch/train.py --backend kolo
"""
import os
import re

import torch.distributed as _dist
from torch.distributed.elastic.multiprocessing import api as _api
from torch.distributed import run as _run


def _from_str(cls, vm):
    if re.fullmatch(r"[0-3]", vm):
        return cls(int(vm))
    return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


if _api.Std.from_str("0") is None:  # the broken lookup; newer torch/Python need no fix
    _api.Std.from_str = classmethod(_from_str)


def _libuv_missing():
    """True where this torch's TCPStore has a libuv server option it cannot honour."""
    if not hasattr(_dist.TCPStore, "libuvBackend"):  # torch < 2.2: no libuv option at all
        return False
    try:  # a throw-away server on an ephemeral loopback port
        _dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False, use_libuv=True)
    except RuntimeError as e:  # DistStoreError derives from RuntimeError
        return "libuv" in str(e)
    return False


if _libuv_missing():
    class _ClassicTCPStore(_dist.TCPStore):
        """TCPStore whose server defaults to the classic (non-libuv) one."""

        def __init__(self, *args, use_libuv=False, **kwargs):
            super().__init__(*args, use_libuv=use_libuv, **kwargs)

    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as _c10d_rdzv
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous as _static_rdzv

    _static_rdzv.TCPStore = _ClassicTCPStore
    _c10d_rdzv.TCPStore = _ClassicTCPStore
    _dist.TCPStore = _ClassicTCPStore  # dynamic_rendezvous constructs dist.TCPStore
    os.environ.setdefault("USE_LIBUV", "0")

if __name__ == "__main__":
    _run.main()
