"""kolo_torch.shrink: lose ranks, keep going (kolo::ProcessGroup::shrink under torch.distributed).

Two ways in, one mechanism (csrc/shrink.cpp):
- ``kolo_torch.shrink(group)``: the survivors of a failure agree through the group's store on who
  is left (whoever calls within the timeout); works on every torch kolo_torch supports.
- ``torch.distributed.shrink_group(ranks, group)`` on a torch whose Backend has the shrink hook
  (2.14): kolo's backend implements it (named ranks). ``kolo_torch.shrink(group, ranks)`` goes
  that way there, and registers the new group itself elsewhere. Call kolo_torch.shrink rather
  than shrink_group itself: it also undoes shrink_group's registration of the backend as gloo's
  type, which DDP would trust (_as_custom).

The store must outlive the lost ranks: under ``kolorun --elastic`` the launcher hosts one
(KOLO_STORE_ADDR); a torch store hosted by a lost rank 0 ends every shrink with its error.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import _C

__all__ = ["shrink"]


def _backend_of(pg):
    """The kolo backend object behind a torch ProcessGroup (torch 1.13: the group itself)."""
    if hasattr(pg, "_get_backend"):  # torch 2.x: a ProcessGroup dispatches to per-device backends
        return pg._get_backend(torch.device("cpu"))
    return pg


def _torch_has_hook():
    return _C.backend_shrink_hook and hasattr(dist, "shrink_group")


def shrink(group=None, ranks_to_exclude=None, timeout=None):
    """Shrinks ``group`` (default: the default group) to the ranks still alive; returns the new group.

    Call it on every survivor once the group's operations have failed (a rank was lost):
    the old group is aborted (its operations in flight fail, later ones at once) and must not
    be used again; the new group's rank i is the i-th survivor in the old group's rank order.

    ``ranks_to_exclude``: None (kolo's agreement: the members are the ranks that call shrink
    before the lowest of them decides, once every rank not reported lost has answered or the
    timeout has passed), or the ranks (of ``group``) to drop, the same list on every survivor.
    ``timeout`` (timedelta or seconds): how long the survivors wait for one another and then for
    the new group to connect; None: the group's timeout.

    The new group serves every torch.distributed call (``group=``) and DDP
    (``process_group=``). Shrinking the default group makes the new group the default one, as
    torch's own shrink_group does; other groups made earlier still count the old ranks and are
    not to be used. A rank that calls it too late (it was stopped) or that is named in
    ``ranks_to_exclude`` gets a RuntimeError saying it was excluded.
    """
    pg = group if group is not None else c10d._get_default_group()
    if isinstance(timeout, (int, float)):
        timeout = timedelta(seconds=timeout)
    if ranks_to_exclude is not None:
        ranks_to_exclude = sorted(int(r) for r in ranks_to_exclude)
        if _torch_has_hook():
            # torch's own path: it calls kolo's Backend::shrink and registers the group; the
            # backend reads the timeout from the options torch hands it.
            opts = None if timeout is None else torch._C._distributed_c10d.Backend.Options("kolo", timeout)
            return _as_custom(dist.shrink_group(ranks_to_exclude, group=pg, pg_options=opts))
    backend = _backend_of(pg)
    new_backend, members = _C.shrink(backend, ranks_to_exclude,
                                     timeout if timeout is not None else timedelta(0))
    excluded = sorted(set(range(pg.size())) - set(members))
    return _register(pg, new_backend, members, excluded)


def _register(old_pg, new_backend, members, excluded):
    """Makes the survivors' backend a torch group in torch.distributed's bookkeeping."""
    if hasattr(c10d, "_finalize_shrunk_group"):
        # torch with shrink_group (2.14): its own registration, as after the hook.
        info = c10d._prepare_shrink_target_group(old_pg)
        return _as_custom(c10d._finalize_shrunk_group(info, set(excluded), new_backend))
    is_default = old_pg == c10d._get_default_group()
    old_globals = dist.get_process_group_ranks(old_pg)
    globals_ = [old_globals[m] for m in members]
    if isinstance(new_backend, dist.ProcessGroup):  # torch 1.13
        return _register_torch1(old_pg, new_backend, globals_, is_default)
    return _register_torch2(old_pg, new_backend, globals_, is_default)


def _as_custom(pg):
    """torch 2.14's shrink_group registers the new CPU backend as gloo's type, whatever it is;
    DDP's logger then casts it to ProcessGroupGloo (a segfault in Logger::set_env_variables).
    kolo's backend is registered as the custom type it had, for the devices it serves."""
    _register_custom(pg, pg._get_backend(torch.device("cpu")), ("cpu", "cuda") if _C.cuda else ("cpu",))
    return pg


def _custom_group(store, backend, name):
    """torch 2.x: a ProcessGroup named `name` dispatching CPU (and CUDA) tensors to kolo's
    `backend`, of the custom type it was made with (not gloo's: DDP's logger would cast it to
    gloo's class)."""
    pg = dist.ProcessGroup(store, backend.rank(), backend.size())
    _register_custom(pg, backend, ("cpu", "cuda"))
    if hasattr(pg, "_set_group_name"):
        pg._set_group_name(name)
    return pg


def _register_custom(pg, backend, devices):
    backend_type = dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(backend_type)
    for device in devices:
        pg._register_backend(torch.device(device), backend_type, backend)


def _register_torch1(old_pg, new_pg, globals_, is_default):
    # torch 1.13: the backend is the ProcessGroup; the bookkeeping is module-level dicts.
    backend_name, store = c10d._pg_map[old_pg]
    name = c10d._pg_names[old_pg] + ":shrunk"
    for table in (c10d._pg_map, c10d._pg_names, c10d._pg_group_ranks):
        table.pop(old_pg, None)
    c10d._pg_map[new_pg] = (backend_name, store)
    c10d._pg_names[new_pg] = name
    if is_default:
        # The survivors renumber: their new ranks are the world's ranks from now on.
        c10d._update_default_pg(new_pg)
        c10d._pg_group_ranks[new_pg] = {i: i for i in range(new_pg.size())}
    else:
        c10d._pg_group_ranks[new_pg] = {g: i for i, g in enumerate(globals_)}
    return new_pg


def _register_torch2(old_pg, new_backend, globals_, is_default):
    # torch 2.x before shrink_group (2.6): kolo's backend as a torch group, registered in _world
    # as new_group would.
    world = c10d._world
    backend_name, store = world.pg_map[old_pg]
    name = world.pg_names[old_pg] + ":shrunk"
    pg = _custom_group(store, new_backend, name)
    for table in (world.pg_map, world.pg_names, world.pg_group_ranks, world.pg_backend_config):
        table.pop(old_pg, None)
    world.pg_map[pg] = (backend_name, store)
    world.pg_names[pg] = name
    world.pg_backend_config[pg] = str(backend_name)
    if is_default:
        c10d._update_default_pg(pg)
        world.pg_group_ranks[pg] = {i: i for i in range(pg.size())}
    else:
        world.pg_group_ranks[pg] = {g: i for i, g in enumerate(globals_)}
    return pg
