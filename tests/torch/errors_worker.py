"""One rank of test_errors.py: 3 ranks on kolo; after one good all_reduce the last rank dies
(os._exit) and the survivors' next all_reduce must raise RuntimeError naming that rank, the
collective and its sequence number, well within the group timeout. Survivors write
{"error": message, "seconds": time to the error} to <out_dir>/<rank>.json."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist

TIMEOUT_S = 60


def main(rank, size, init_method, out_dir):
    import kolo_torch  # noqa: F401
    dist.init_process_group("kolo", init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    x = torch.ones(1000)
    dist.all_reduce(x)
    assert x[0].item() == size
    dist.barrier()
    if rank == size - 1:
        os._exit(3)  # dies without a goodbye, like a crashed trainer
    time.sleep(0.5)
    res = {"error": None}
    t0 = time.monotonic()
    try:
        dist.all_reduce(x)
        dist.all_reduce(x)  # the first may have completed before the peer's death was seen
    except RuntimeError as e:
        res["error"] = str(e)
    res["seconds"] = time.monotonic() - t0
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(res, f)
    os._exit(0)  # the group is broken: no orderly shutdown
