"""kolo_torch.grow and kolo_torch.join: let a replacement in, keep training
(kolo::ProcessGroup::grow and ::join under torch.distributed; csrc/grow.cpp).

- ``kolo_torch.grow(group)`` on every member, at a point they all reach (a step boundary):
  admits the processes waiting in ``join`` and returns the grown group, or None when nobody was
  waiting (then it costs rank 0 one store call and the others a small broadcast).
- ``kolo_torch.join()`` in a process that replaces a lost rank (``kolorun --elastic --replace N``
  starts it with KOLO_JOIN=1): instead of ``init_process_group``, it waits until the members'
  grow lets it in and installs the default group at the rank and size it was admitted at.

Not ``init_process_group("kolo")`` honouring KOLO_JOIN: torch fixes the new group's rank and size
before the backend is made, and its init barrier counts the launch's ranks, while a joiner
learns its rank and the size only when it is admitted.

The joiner finds the members' queue under the store they passed to ``init_process_group``
(under ``kolorun --elastic``: the one it hosts, KOLO_STORE_ADDR, which outlives every rank),
prefixed as torch prefixes the default group's store for its backend.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import _C
from ._shrink import _backend_of, _custom_group

__all__ = ["grow", "join"]


def _seconds(value, default):
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value
    return timedelta(seconds=float(value))


def grow(group=None, wait=0, timeout=None, max_joiners=0):
    """Lets the processes waiting in ``kolo_torch.join`` into ``group`` (default: the default group).

    Collective over ``group``: every member calls it at the same point (a step boundary).
    Returns None when nobody joined (``group`` stays as it was). Else the grown group: every
    member keeps its rank, the joiners follow (ranks ``group.size()``, ... in arrival order);
    ``group`` is shut down (its operations fail from then on, as after a shrink) and the new one
    serves every torch.distributed call (``group=``) and DDP (``process_group=``). The joiners
    hold nothing yet: broadcast them the state they need (parameters, optimizer state, step).
    When ``group`` is the default group, the new one becomes the default group.

    ``wait`` (seconds or timedelta): how long rank 0 waits for a first joiner when none is waiting
    yet (0: decide at once, the cheap check for every step boundary); the other members wait that
    long for its answer. ``timeout``: bounds the new group's connecting (None: the group's).
    ``max_joiners``: admit at most this many (0: every one waiting).
    """
    pg = group if group is not None else c10d._get_default_group()
    new_backend = _C.grow(_backend_of(pg), _seconds(wait, timedelta(0)), int(max_joiners),
                          _seconds(timeout, timedelta(0)))
    if new_backend is None:
        return None
    is_default = pg == c10d._get_default_group()
    backend_name, store = _pg_map()[pg]
    old_globals = dist.get_process_group_ranks(pg)
    _forget(pg)
    new_pg = _install(new_backend, backend_name, store, is_default)
    if not is_default:
        # The joiners are in no other group: their global ranks are unknown here; the members'
        # are kept (a member's rank in the grown group is its rank in `group`).
        _group_ranks()[new_pg] = {g: i for i, g in enumerate(old_globals)}
    _sync_group_count(new_pg, is_default)
    return new_pg


def join(store=None, timeout=None, wait=None):
    """Enters a running job as a replacement: the default group, as the members' grow admitted it.

    Call it instead of ``init_process_group`` in a process that ``KOLO_JOIN=1`` marks (``kolorun
    --elastic --replace N`` starts a lost rank's replacement so). It waits in the members' queue
    until their ``kolo_torch.grow`` lets it in, installs the grown group as the default group
    (``dist.get_rank()`` / ``get_world_size()``: the rank and size it was admitted at, which need
    not be the RANK / WORLD_SIZE it was started with) and returns it. Receive the training state
    from the members next (they broadcast it after their grow).

    ``store``: the store the members passed to ``init_process_group`` (default: a client of
    KOLO_STORE_ADDR, the store ``kolorun`` hosts). ``timeout`` (seconds or timedelta): the group's
    timeout, as ``init_process_group``'s (default 300 s). ``wait``: how long to wait to be admitted
    (default: ``timeout``); a RuntimeError naming the group follows when nobody admitted it in
    time, or at once when the job has ended.
    """
    if dist.is_initialized():
        raise RuntimeError("kolo_torch.join: the default group exists already; join replaces init_process_group")
    timeout = _seconds(timeout, timedelta(seconds=300))
    wait = _seconds(wait, timeout)
    if store is None:
        addr = os.environ.get("KOLO_STORE_ADDR")
        if not addr:
            raise RuntimeError("kolo_torch.join: no store given and KOLO_STORE_ADDR is unset (kolorun --elastic "
                               "hosts the job's store and sets it; else pass the members' store)")
        host, port = addr.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), is_master=False, timeout=timeout)
    group_store, backend_store = _default_group_stores(store)
    backend = _C.join(backend_store, timeout, wait)
    pg = _install(backend, "kolo", group_store, True)
    _sync_group_count(pg, True)
    return pg


def _default_group_stores(store):
    """(the store torch records for the default group, the store it hands the group's backend),
    as init_process_group("kolo", store=store) makes them (group name "0": the first group)."""
    if not hasattr(dist.ProcessGroup, "_register_backend"):
        # torch 1.13: the backend gets PrefixStore(group name) of the user's store, and torch
        # records the user's store itself.
        return store, dist.PrefixStore("0", store)
    # torch 2.x: "<group name>/" for the group, then the backend's first device, "cpu/".
    group_store = dist.PrefixStore("0/", store)
    devices = list(c10d.BackendConfig(dist.Backend("kolo")).get_device_backend_map())
    return group_store, dist.PrefixStore("%s/" % devices[0], group_store)


def _pg_map():
    return c10d._world.pg_map if hasattr(c10d, "_world") else c10d._pg_map


def _group_ranks():
    return c10d._world.pg_group_ranks if hasattr(c10d, "_world") else c10d._pg_group_ranks


def _forget(pg):
    """Removes a (retired) group from torch.distributed's bookkeeping."""
    if not hasattr(c10d, "_world"):  # torch 1.13: module-level dicts
        for table in (c10d._pg_map, c10d._pg_names, c10d._pg_group_ranks):
            table.pop(pg, None)
        return
    if hasattr(c10d, "_cleanup_process_group_global_state"):  # torch 2.14: every table, and C++'s
        c10d._cleanup_process_group_global_state(pg)
        return
    world = c10d._world
    name = world.pg_names.get(pg)
    for table in (world.pg_map, world.pg_names, world.pg_group_ranks, world.pg_backend_config):
        table.pop(pg, None)
    tag = getattr(world, "pg_to_tag", {}).pop(pg, None)
    for t in (tag, ""):
        members = getattr(world, "tags_to_pg", {}).get(t)
        if members and pg in members:
            members.remove(pg)
    if name is not None and hasattr(c10d, "_unregister_process_group"):
        c10d._unregister_process_group(name)


def _install(backend, backend_name, store, is_default):
    """Makes a grown (or joined) backend a torch group in torch.distributed's bookkeeping.

    Its name is the kolo generation's, the same on members and joiners."""
    name = "kolo:gen%d" % _C.generation(backend)
    if isinstance(backend, dist.ProcessGroup):  # torch 1.13: the backend is the ProcessGroup
        pg = backend
        c10d._pg_map[pg] = (backend_name, store)
        c10d._pg_names[pg] = name
    else:
        pg = _custom_group(store, backend, name)
        config = str(c10d.BackendConfig(dist.Backend(backend_name)))
        if hasattr(c10d, "_register_pg_in_world"):  # torch 2.14: every table, and C++'s registry
            c10d._register_pg_in_world(pg, backend_name=backend_name, store=store, group_name=name,
                                       backend_config=config, add_to_default_tag=True)
        else:
            world = c10d._world
            world.pg_map[pg] = (backend_name, store)
            world.pg_names[pg] = name
            world.pg_backend_config[pg] = config
            if hasattr(c10d, "_register_process_group"):
                c10d._register_process_group(name, pg)
            if hasattr(world, "tags_to_pg"):
                tag = "ptd:" + name
                world.tags_to_pg.setdefault("", []).append(pg)
                world.tags_to_pg.setdefault(tag, []).append(pg)
                world.pg_to_tag[pg] = tag
    if is_default:
        # Members keep their ranks and joiners follow: the group's ranks are the world's now.
        c10d._update_default_pg(pg)
        _group_ranks()[pg] = {i: i for i in range(pg.size())}
    return pg


def _sync_group_count(pg, is_default):
    """torch names a new_group after its count of groups made so far, which the joiners, new to
    the job, lack: they take rank 0's, so that later new_group calls agree on every rank."""
    if not is_default:
        return
    holder = c10d._world if hasattr(c10d, "_world") else c10d
    attr = "group_count" if hasattr(c10d, "_world") else "_group_count"
    count = torch.tensor([getattr(holder, attr)], dtype=torch.int64)
    dist.broadcast(count, 0, group=pg)
    setattr(holder, attr, int(count.item()))
