"""torchrun (torch.distributed.run), usable on Debian's torch: 1.13 on Python 3.11 (Debian 12)
and 2.x built without libuv (Debian forky/trixie).

torch 1.13's Std.from_str looks the value up by iterating the Std flag enum, and since Python
3.11 that iteration skips NONE (0) and ALL (3): torchrun's default "--redirects 0 --tee 0"
then fails with "'NoneType' object has no attribute 'get'". This converts the value with Std()
instead.

torch 2.x's TCPStore asks for the libuv server by default, and the rendezvous handlers that
torchrun's agent uses (static, c10d, dynamic) construct it without use_libuv, ignoring
USE_LIBUV: a torch built without libuv (Debian's) then fails at start with "use_libuv was
requested but PyTorch was built without libuv support". _libuv.apply() gives those handlers a
TCPStore whose default is the classic server (import kolo_torch does the same in the workers).

Everything else goes to torch.distributed.run unchanged:

    /usr/bin/python3 -m kolo_torch.run --nproc_per_node 2 examples/torch/train.py --backend kolo
"""
import re

from torch.distributed.elastic.multiprocessing import api as _api
from torch.distributed import run as _run

from . import _libuv


def _from_str(cls, vm):
    if re.fullmatch(r"[0-3]", vm):
        return cls(int(vm))
    return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


if _api.Std.from_str("0") is None:  # the broken lookup; newer torch/Python need no fix
    _api.Std.from_str = classmethod(_from_str)


_libuv.apply()

if __name__ == "__main__":
    _run.main()
