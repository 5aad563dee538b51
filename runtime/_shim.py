"""The shim itself. Imports torch; loaded only when the shim is used.

Two torch function modes do the work:

* ``_BindMode`` is pushed by :func:`simulated_symmetric_memory`: every tensor created
  inside it (a fresh storage, not a view of an argument) is recorded as bound to the
  context's group, with the user's allocation site.
* ``_ShimMode`` is pushed by :class:`enforce`: it sees every ``torch.distributed``
  collective, however it was imported (a function mode sees calls made through names
  bound before the shim was installed), looks up each tensor argument in the binding
  table and issues verdicts. It never touches the arguments: outputs are bitwise the
  same with and without it.

The few module attributes it patches (torch symmetric memory, NCCL mem-pool
registration, SGLang's symmetric-memory context and group coordinator when SGLang is
importable, ``new_group`` for divergence mirrors) are restored on exit to the very
objects that were there before.
"""

from __future__ import annotations

import importlib
import inspect
import threading
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

from . import _report
from ._report import (
    GROUP_MISMATCH,
    POOL_REUSE,
    RANK_DIVERGENCE,
    CommGroupRuntimeWarning,
    GroupMismatchError,
    Violation,
)
from ._sites import DEFAULT_HELPER_MODULES, SiteFinder
from ._table import BindingTable, _device_key

# torch.distributed functions that run a collective, by the name torch gives them, mapped
# to the name users know. torch 2.13 routes all_gather_into_tensor/reduce_scatter_tensor
# to all_gather_single/reduce_scatter_single, and those are what a function mode sees.
COLLECTIVE_NAMES = {
    "all_reduce": "all_reduce",
    "all_gather_into_tensor": "all_gather_into_tensor",
    "all_gather_single": "all_gather_into_tensor",
    "_all_gather_base": "all_gather_into_tensor",
    "reduce_scatter_tensor": "reduce_scatter_tensor",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all_single": "all_to_all_single",
    "all_to_all": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
}

#: Group-wrapper classes whose collective methods bypass torch.distributed (SGLang's
#: coordinator uses pynccl and custom ops); their methods are wrapped directly.
DEFAULT_GROUP_CLASSES = ("sglang.srt.distributed.parallel_state:GroupCoordinator",)
DEFAULT_GROUP_METHODS = (
    "all_reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_gather",
    "reduce_scatter",
    "reduce_scatterv",
    "all_gatherv",
    "broadcast",
)
#: Symmetric-memory context classes taking the group as first argument (``group_coordinator``).
DEFAULT_CONTEXT_CLASSES = (
    "sglang.srt.distributed.device_communicators.pynccl_allocator:SymmetricMemoryContext",
)

_tls = threading.local()
TABLE = BindingTable()
_Tensor = torch.Tensor
_ProcessGroup = dist.ProcessGroup
#: Bookkeeping on tensors (storage, address, device) inside a mode's handler must not go
#: through the modes below it (each would cost a full dispatch).
_no_torch_function = torch._C.DisableTorchFunction
_LABELS: dict = {}
VIOLATIONS: list[Violation] = []
_SEEN: set = set()


# ---------------------------------------------------------------------------------------
# groups


def as_process_group(group):
    """The ProcessGroup behind ``group``: a ProcessGroup, a coordinator-like wrapper
    (``device_group``), a group name, or None for the default group."""
    if isinstance(group, _ProcessGroup):  # the hot case, first (WORLD is one too)
        return group
    if group is None or group is dist.group.WORLD:
        return dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
    for attr in ("device_group", "process_group", "pg"):
        pg = getattr(group, attr, None)
        if isinstance(pg, dist.ProcessGroup):
            label = getattr(group, "unique_name", None) or getattr(group, "group_name", None)
            if label and pg not in _LABELS and isinstance(label, str):
                _LABELS[pg] = label
            return pg
    if isinstance(group, str):
        return dist.distributed_c10d._resolve_process_group(group)
    return group


def name_group(group, label: str):
    """Give ``group`` (a ProcessGroup or a wrapper) a human label for messages."""
    pg = as_process_group(group)
    _LABELS[pg] = label
    return group


def group_label(pg) -> str:
    if pg is None:
        return "<none>"
    label = _LABELS.get(pg)
    if label:
        return label
    desc = getattr(pg, "group_desc", None)
    if desc and desc not in ("undefined", "default_pg") and not desc.startswith("commgroup"):
        return desc
    try:
        if dist.is_initialized() and pg is dist.distributed_c10d._get_default_group():
            return "world"
    except Exception:  # pragma: no cover - defensive
        pass
    return str(getattr(pg, "group_name", pg))


# ---------------------------------------------------------------------------------------
# simulated symmetric memory


class SimulatedSymmetricPool:
    """A model of the shared symmetric pool's registration scheme.

    ``scheme="per_context"`` (newer SGLang): memory allocated in a group's context is
    registered with that group. ``scheme="on_create"`` (older SGLang): a block is
    registered once, with the group whose context created it; a block freed and handed
    out again under another group keeps its first registration (pool reuse, CGL005).
    Blocks are modelled by size class (``round_to`` bytes, like the CUDA caching
    allocator); no memory is actually shared, so results are unaffected.
    """

    def __init__(self, scheme: str = "per_context", round_to: int = 512):
        if scheme not in ("per_context", "on_create"):
            raise ValueError("scheme must be 'per_context' or 'on_create'")
        self.scheme = scheme
        self.round_to = round_to
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()

    def _acquire(self, nbytes: int, group):
        size = -(-nbytes // self.round_to) * self.round_to
        if self.scheme == "per_context":
            return None, {group}
        with self._lock:
            free = self._free.get(size)
            block = free.pop() if free else (size, frozenset({group}))
        return block, set(block[1])

    def _release(self, block) -> None:
        if block is None:
            return
        with self._lock:
            self._free.setdefault(block[0], []).append(block)

    def reset(self) -> None:
        with self._lock:
            self._free.clear()


DEFAULT_POOL = SimulatedSymmetricPool("per_context")


_FINDERS: dict = {}


def _finder_for(helper_modules) -> SiteFinder:
    """One site finder per helper-module list, kept, so its per-code verdicts stay warm."""
    key = tuple(helper_modules)
    finder = _FINDERS.get(key)
    if finder is None:
        finder = _FINDERS[key] = SiteFinder(key)
    return finder


def _tensors_in(args, kwargs):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    yield b
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, torch.Tensor):
                yield a
            elif isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, torch.Tensor):
                        yield b


_SEQUENCES = (list, tuple)


def _tensor_list(args, kwargs):
    """The tensors among a collective's arguments (and in its list arguments), as a list:
    :func:`_tensors_in` without the generator, for the per-collective path."""
    out = []
    for a in args:
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, _SEQUENCES):
            out.extend([b for b in a if isinstance(b, _Tensor)])
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, _Tensor):
                out.append(a)
            elif isinstance(a, _SEQUENCES):
                out.extend([b for b in a if isinstance(b, _Tensor)])
    return out


class _BindMode(TorchFunctionMode):
    """Tags fresh storages created inside it as bound to ``group``."""

    def __init__(self, group, pool, register, finder):
        super().__init__()
        self.group = group
        self.pool = pool
        self.register = register
        self.finder = finder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        if isinstance(out, _Tensor):
            outs = (out,)
        elif isinstance(out, (tuple, list)):
            outs = [o for o in out if isinstance(o, _Tensor)]
            if not outs:
                return out
        else:
            return out
        with _no_torch_function():
            inputs = None
            for t in outs:
                if t.is_meta:
                    continue
                storage = t.untyped_storage()
                nbytes = storage.nbytes()
                if not nbytes:
                    continue
                ptr = storage.data_ptr()
                if inputs is None:
                    inputs = {x.untyped_storage().data_ptr() for x in _tensors_in(args, kwargs)}
                if ptr in inputs:
                    continue
                dev = _device_key(t)
                if TABLE.has_address(dev, ptr):
                    continue
                self._bind(t, storage, ptr, nbytes, dev)
        return out

    def _bind(self, t, storage, ptr, nbytes, dev):
        site = self.finder.find()
        if self.register:
            block, registered = self.pool._acquire(nbytes, self.group)
            TABLE.bind_storage(storage, ptr, nbytes, dev, self.group, site, registered,
                               self.pool if block else None, block)
        else:
            TABLE.bind_storage(storage, ptr, nbytes, dev, self.group, site, ())

    def bind(self, t):
        with _no_torch_function():
            storage = t.untyped_storage()
            self._bind(t, storage, storage.data_ptr(), storage.nbytes(), _device_key(t))


class simulated_symmetric_memory:
    """Context manager: tensors allocated inside are bound to ``group``.

    What SGLang's ``use_symmetric_memory`` does on GPUs, minus the NCCL registration,
    on any device. ``pool`` picks the registration scheme that is modelled
    (:class:`SimulatedSymmetricPool`); ``register=False`` records only the allocation
    group and leaves registration to the real hooks (NCCL mem pool, torch symmetric
    memory), which is how a CUDA allocator that really registers uses it.
    """

    def __init__(self, group, *, disabled: bool = False, pool=None, register: bool = True, helper_modules=None):
        self.disabled = disabled
        self.group = None if disabled else as_process_group(group)
        self.pool = pool or DEFAULT_POOL
        self.register = register
        self.helper_modules = helper_modules
        self._mode = None

    def __enter__(self):
        if self.disabled:
            return self
        shim = _active_shim()
        finder = shim.finder if shim is not None and self.helper_modules is None else _finder_for(
            self.helper_modules if self.helper_modules is not None else DEFAULT_HELPER_MODULES
        )
        self._mode = _BindMode(self.group, self.pool, self.register, finder)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(*exc)
        return False


def bind_buffer(tensor, group, *, registered=None):
    """Bind an existing tensor's storage to ``group`` by hand (for custom allocators)."""
    pg = as_process_group(group)
    shim = _active_shim()
    finder = shim.finder if shim else _finder_for(DEFAULT_HELPER_MODULES)
    TABLE.bind(tensor, pg, finder.find(), {pg} if registered is None else set(registered))
    return tensor


# ---------------------------------------------------------------------------------------
# the enforcing shim


class _Patcher:
    def __init__(self):
        self._saved = []

    def set(self, owner, name, value):
        own = name in vars(owner)
        old = vars(owner)[name] if own else getattr(owner, name)
        setattr(owner, name, value)
        self._saved.append((owner, name, own, old))

    def restore(self):
        while self._saved:
            owner, name, own, old = self._saved.pop()
            try:
                if own:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)
            except (AttributeError, TypeError):  # pragma: no cover - defensive
                pass


def _load(path):
    module, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(module)
    except Exception:
        return None
    return getattr(mod, attr, None)


def _collective_table():
    c10d = dist.distributed_c10d
    table = {}
    for name, canonical in COLLECTIVE_NAMES.items():
        func = getattr(c10d, name, None)
        if func is None:
            continue
        try:
            params = list(inspect.signature(func).parameters)
            pos = params.index("group")
        except (TypeError, ValueError):
            pos = None
        table[func] = (canonical, pos)
    return table


def _reaches_function_mode(func) -> bool:
    """Whether a collective hands itself to torch function modes (``handle_torch_function``)
    or delegates to one that does; torch 2.11's list ``reduce_scatter`` does neither."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None:
        return False
    names = set(code.co_names)
    if "handle_torch_function" in names:
        return True
    c10d = dist.distributed_c10d
    return any(n in names and n != func.__name__ for n in COLLECTIVE_NAMES if getattr(c10d, n, None) is not None)


def _mode_specs(collectives):
    """``func -> (name, group position, body)`` for the collectives a function mode sees.

    ``body`` is the function under its decorators (``inspect.unwrap``): when the mode is
    handed the call, the decorators (exception logger, wait counter) have already run
    around it, so the shim calls the body once instead of the whole chain again.
    """
    specs = {}
    for func, (name, pos) in collectives.items():
        try:
            body = inspect.unwrap(func)
        except ValueError:  # pragma: no cover - a __wrapped__ cycle
            body = func
        if not callable(body):  # pragma: no cover - defensive
            body = func
        specs[func] = (name, pos, body)
    return specs


class _ShimMode(TorchFunctionMode):
    """Sees every torch call made while the shim is installed; all but collectives are
    handed straight back (one dict membership test), collectives are checked."""

    def __init__(self, shim):
        super().__init__()
        self.shim = shim
        self.collectives = shim.collectives
        self.specs = _mode_specs(shim.collectives)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in self.specs:
            return func(*args, **kwargs) if kwargs else func(*args)
        if getattr(_tls, "suppress", 0):
            return func(*args, **(kwargs or {}))
        name, pos, body = self.specs[func]
        kwargs = kwargs or {}
        if "group" in kwargs:
            group = kwargs["group"]
        elif pos is not None and pos < len(args):
            group = args[pos]
        else:
            group = None
        return self.shim.run_collective(name, body, args, kwargs, group)


class _Shim:
    """The installed state behind one outermost :class:`enforce`."""

    def __init__(self, mode, helper_modules, divergence, divergence_timeout, group_classes, context_classes):
        self.mode = mode
        self.finder = _finder_for(helper_modules)
        self.divergence = divergence
        self.divergence_timeout = divergence_timeout
        self.group_classes = group_classes
        self.context_classes = context_classes
        self.collectives = _collective_table()
        self.patcher = _Patcher()
        self.mirrors: dict = {}
        self.violations: list[Violation] = []
        self._mode = None

    # -- install / uninstall ----------------------------------------------------------
    def install(self):
        self._patch_symmetric_memory()
        self._patch_mem_pool()
        for path in self.context_classes:
            cls = _load(path)
            if isinstance(cls, type):
                self._patch_context_class(cls)
        for path in self.group_classes:
            cls = _load(path)
            if isinstance(cls, type):
                wrap_group_methods(cls, patcher=self.patcher)
        if self.divergence:
            self._patch_new_group()
        self._patch_unreachable_collectives()
        self._mode = _ShimMode(self)
        self._mode.__enter__()

    def uninstall(self):
        try:
            if self._mode is not None:
                self._mode.__exit__(None, None, None)
        finally:
            self._mode = None
            self.patcher.restore()

    def _patch_unreachable_collectives(self):
        """Collectives a function mode never sees are wrapped as module attributes instead
        (calls through names imported before ``enforce`` then go unchecked)."""
        c10d = dist.distributed_c10d
        for func, (name, pos) in list(self.collectives.items()):
            if _reaches_function_mode(func):
                continue
            shim = self

            def wrapper(*args, __func=func, __name=name, __pos=pos, **kwargs):
                if getattr(_tls, "suppress", 0):
                    return __func(*args, **kwargs)
                group = kwargs.get("group", args[__pos] if __pos is not None and __pos < len(args) else None)
                _tls.suppress = getattr(_tls, "suppress", 0) + 1
                try:
                    return shim.run_collective(__name, __func, args, kwargs, group)
                finally:
                    _tls.suppress -= 1

            wrapper.__wrapped__ = func
            wrapper.__name__ = func.__name__
            attr = func.__name__
            if getattr(c10d, attr, None) is func:
                self.patcher.set(c10d, attr, wrapper)
            if getattr(dist, attr, None) is func:
                self.patcher.set(dist, attr, wrapper)

    def _patch_symmetric_memory(self):
        try:
            symm = importlib.import_module("torch.distributed._symmetric_memory")
        except Exception:
            return
        orig_empty = getattr(symm, "empty", None)
        orig_rdv = getattr(symm, "rendezvous", None)
        finder = self.finder
        if orig_empty is not None:

            def empty(*args, **kwargs):
                t = orig_empty(*args, **kwargs)
                TABLE.bind(t, None, finder.find(), ())
                return t

            empty.__wrapped__ = orig_empty
            self.patcher.set(symm, "empty", empty)
        if orig_rdv is not None:

            def rendezvous(tensor, group, *args, **kwargs):
                handle = orig_rdv(tensor, group, *args, **kwargs)
                pg = as_process_group(group)
                rec, _ = TABLE.lookup(tensor)
                if rec is None:
                    rec = TABLE.bind(tensor, pg, finder.find(), ())
                if rec is not None:
                    if rec.alloc_group is None:
                        rec.alloc_group = pg
                    rec.registered.add(pg)
                return handle

            rendezvous.__wrapped__ = orig_rdv
            self.patcher.set(symm, "rendezvous", rendezvous)

    def _patch_mem_pool(self):
        cls = getattr(dist, "ProcessGroupNCCL", None)
        if cls is None or not hasattr(cls, "register_mem_pool"):
            return
        orig_reg = cls.register_mem_pool
        orig_dereg = getattr(cls, "deregister_mem_pool", None)

        def register_mem_pool(backend, pool, *args, **kwargs):
            out = orig_reg(backend, pool, *args, **kwargs)
            pg = _pg_of_backend(backend)
            for seg in _pool_segments(pool):
                TABLE.register_segment(("cuda", seg["device"]), seg["address"], seg["total_size"], pg)
            return out

        try:
            self.patcher.set(cls, "register_mem_pool", register_mem_pool)
        except (AttributeError, TypeError):  # pragma: no cover - immutable binding class
            return
        if orig_dereg is not None:

            def deregister_mem_pool(backend, pool, *args, **kwargs):
                for seg in _pool_segments(pool):
                    TABLE.drop_segment(("cuda", seg["device"]), seg["address"])
                return orig_dereg(backend, pool, *args, **kwargs)

            self.patcher.set(cls, "deregister_mem_pool", deregister_mem_pool)

    def _patch_context_class(self, cls):
        orig_enter, orig_exit = cls.__enter__, cls.__exit__

        def __enter__(ctx):
            out = orig_enter(ctx)
            group = getattr(ctx, "group_coordinator", None) or getattr(ctx, "group", None)
            bind = simulated_symmetric_memory(group, register=False)
            bind.__enter__()
            ctx.__dict__["_commgroup_lint_bind"] = bind
            return out

        def __exit__(ctx, *exc):
            bind = ctx.__dict__.pop("_commgroup_lint_bind", None)
            if bind is not None:
                bind.__exit__(*exc)
            return orig_exit(ctx, *exc)

        self.patcher.set(cls, "__enter__", __enter__)
        self.patcher.set(cls, "__exit__", __exit__)

    def _patch_new_group(self):
        c10d = dist.distributed_c10d
        orig = c10d.new_group
        shim = self

        def new_group(*args, **kwargs):
            pg = orig(*args, **kwargs)
            if kwargs.get("use_local_synchronization"):
                return pg
            ranks = args[0] if args else kwargs.get("ranks")
            mirror = orig(ranks=ranks, backend="gloo", timeout=timedelta(seconds=shim.divergence_timeout))
            if isinstance(pg, dist.ProcessGroup) and isinstance(mirror, dist.ProcessGroup):
                shim.mirrors[pg] = mirror
            return pg

        new_group.__wrapped__ = orig
        self.patcher.set(c10d, "new_group", new_group)
        if dist.new_group is orig:
            self.patcher.set(dist, "new_group", new_group)
        if dist.is_initialized():
            world = c10d._get_default_group()
            self.mirrors[world] = orig(backend="gloo", timeout=timedelta(seconds=self.divergence_timeout))

    # -- verdicts -----------------------------------------------------------------------
    def run_collective(self, name, func, args, kwargs, group):
        pg = group if type(group) is _ProcessGroup else as_process_group(group)
        found = None
        flags = [] if self.divergence else None
        lookup = TABLE.lookup
        for t in _tensor_list(args, kwargs):
            rec, seg = lookup(t)
            if rec is None and seg is None:
                if flags is not None:
                    flags.append(0)
                continue
            if flags is not None:
                flags.append(1)
            # The passing case, decided without building anything: allocated under this
            # group (or no allocation group known) and registered with it (or nowhere).
            if rec is not None:
                alloc, registered = rec.alloc_group, rec.registered
            else:
                alloc, registered = None, ()
            if (alloc is None or alloc is pg) and (
                (not registered and not seg) or pg in registered or (seg is not None and pg in seg)
            ):
                continue
            v = self._verdict(name, t, rec, seg, pg)
            if v is not None:
                if found is None:
                    found = []
                found.append(v)
        if flags:
            mirror = self.mirrors.get(pg)
            if mirror is not None:
                v = self._divergence(name, pg, mirror, flags, args, kwargs)
                if v is not None:
                    if found is None:
                        found = []
                    found.append(v)
        if found is None:
            return func(*args, **kwargs)
        # Recorded (and warned) before the call, so a collective that fails still leaves
        # its verdict; in assert mode raised after it, so that peers never hang.
        raise_after = [v for v in found if self.emit(v)]
        out = func(*args, **kwargs)
        if raise_after:
            raise GroupMismatchError(raise_after[0])
        return out

    def _verdict(self, name, tensor, rec, seg, pg):
        if rec is None and seg is None:
            return None
        alloc = rec.alloc_group if rec is not None else None
        registered = set(rec.registered) if rec is not None else set()
        if seg:
            registered |= seg
        if alloc is not None and alloc is not pg:
            code, bound = GROUP_MISMATCH, alloc
        elif alloc is None and registered and pg not in registered:
            code, bound = GROUP_MISMATCH, next(iter(registered))
        elif alloc is not None and registered and pg not in registered:
            code, bound = POOL_REUSE, next(iter(registered))
        else:
            return None
        coll = self.finder.find()
        alloc_site = rec.site if rec is not None and rec.site is not None else coll
        if code == GROUP_MISMATCH:
            msg = (
                f"CGL002 buffer bound to group '{group_label(bound)}' (allocated at "
                f"{_short(alloc_site)}) is used by {name} on group '{group_label(pg)}' at {_short(coll)}"
            )
        else:
            msg = (
                f"CGL005 buffer allocated under group '{group_label(alloc)}' (at {_short(alloc_site)}) "
                f"reuses a pool block registered with group '{group_label(bound)}', not "
                f"'{group_label(alloc)}'; {name} on group '{group_label(pg)}' at {_short(coll)} "
                "does not get the symmetric path"
            )
        return Violation(
            code=code,
            message=msg,
            path=alloc_site.path,
            line=alloc_site.line,
            collective=name,
            collective_path=coll.path,
            collective_line=coll.line,
            buffer_group=group_label(bound),
            collective_group=group_label(pg),
            rank=_rank(),
        )

    def _divergence(self, name, pg, mirror, flags, args, kwargs):
        try:
            mine = torch.tensor(flags, dtype=torch.int64)
            gathered = [torch.empty_like(mine) for _ in range(mirror.size())]
            dist.all_gather(gathered, mine, group=mirror)
        except Exception as exc:  # timeout or a peer that never came: never hang the job
            warnings.warn(
                f"commgroup-lint: rank-divergence check for {name} on group "
                f"'{group_label(pg)}' failed ({type(exc).__name__}: {str(exc)[:120]})",
                CommGroupRuntimeWarning,
                stacklevel=2,
            )
            return None
        ranks = dist.get_process_group_ranks(mirror)
        rows = [g.tolist() for g in gathered]
        if all(r == rows[0] for r in rows):
            return None
        coll = self.finder.find()
        alloc_site = coll
        for t in _tensors_in(args, kwargs):
            rec, _ = TABLE.lookup(t)
            if rec is not None and rec.site is not None:
                alloc_site = rec.site
                break
        bound = [ranks[i] for i, r in enumerate(rows) if any(r)]
        unbound = [ranks[i] for i, r in enumerate(rows) if not all(r)]
        msg = (
            f"CGL006 ranks disagree on whether the buffers of {name} on group "
            f"'{group_label(pg)}' at {_short(coll)} are group-bound: bound on ranks {bound}, "
            f"unbound on ranks {unbound}"
        )
        return Violation(
            code=RANK_DIVERGENCE,
            message=msg,
            path=alloc_site.path,
            line=alloc_site.line,
            collective=name,
            collective_path=coll.path,
            collective_line=coll.line,
            collective_group=group_label(pg),
            rank=_rank(),
            details={"bound_ranks": bound, "unbound_ranks": unbound},
        )

    def emit(self, v: Violation) -> bool:
        """Record ``v`` (once per distinct bug); True when it must be raised (assert mode)."""
        key = v.key()
        if key not in _SEEN:
            _SEEN.add(key)
            VIOLATIONS.append(v)
            self.violations.append(v)
            if self.mode == "warn":
                warnings.warn(v.message, CommGroupRuntimeWarning, stacklevel=4)
        return self.mode == "assert"


def _short(site) -> str:
    import os

    path = site.path
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:  # pragma: no cover - other drive on Windows
        pass
    return f"{path}:{site.line}"


def _rank():
    try:
        return dist.get_rank() if dist.is_initialized() else None
    except Exception:  # pragma: no cover
        return None


def _pg_of_backend(backend):
    c10d = dist.distributed_c10d
    for pg in list(c10d._world.pg_map):
        try:
            if pg._get_backend(torch.device("cuda")) is backend:
                return pg
        except Exception:
            continue
    return backend


def _pool_segments(pool):
    segs = []
    try:
        for seg in pool.snapshot():
            segs.append(seg)
    except Exception:
        pass
    return segs


def wrap_group_methods(cls, methods=DEFAULT_GROUP_METHODS, group_attr="device_group", patcher=None):
    """Check the collective methods of a group-wrapper class (SGLang's ``GroupCoordinator``)
    whose collectives do not go through ``torch.distributed``. Restored by ``enforce``'s exit
    when ``patcher`` is the shim's."""
    for meth in methods:
        orig = cls.__dict__.get(meth)
        if orig is None or not callable(orig):
            continue

        def wrapper(self, *args, __orig=orig, __name=meth, **kwargs):
            shim = _active_shim()
            if shim is None or getattr(_tls, "suppress", 0):
                return __orig(self, *args, **kwargs)
            _tls.suppress = getattr(_tls, "suppress", 0) + 1
            try:
                return shim.run_collective(
                    __name, lambda *a, **k: __orig(self, *a, **k), args, kwargs, getattr(self, group_attr, None) or self
                )
            finally:
                _tls.suppress -= 1

        wrapper.__wrapped__ = orig
        wrapper.__name__ = meth
        if patcher is not None:
            patcher.set(cls, meth, wrapper)
        else:
            setattr(cls, meth, wrapper)


# ---------------------------------------------------------------------------------------
# public context manager

_STACK: list = []  # (enforce object) outermost first; the shim is owned by the outermost
_SHIM: list = []


def _active_shim():
    return _SHIM[-1] if _SHIM else None


class enforce:
    """Install the shim for the duration of a ``with`` block.

    ``mode``: ``"assert"`` raises :class:`GroupMismatchError` (after the collective ran,
    so peers never hang), ``"warn"`` issues a :class:`CommGroupRuntimeWarning` once per
    violation, ``"report"`` only records. Violations are in ``.violations`` afterwards.

    ``helper_modules``: modules whose frames are skipped when finding the user's
    allocation and collective sites (defaults to SGLang's dp_attention and distributed
    packages; modules can also declare ``__commgroup_lint_helper__ = True``).

    ``divergence=True`` checks, at each collective, that all ranks agree on whether its
    buffers are bound (CGL006), over a gloo mirror of the group created next to it by
    ``new_group`` (so enter ``enforce`` before creating groups, on every rank).
    """

    def __init__(
        self,
        mode: str = "assert",
        *,
        helper_modules=DEFAULT_HELPER_MODULES,
        divergence: bool = False,
        divergence_timeout: float = 30.0,
        group_classes=DEFAULT_GROUP_CLASSES,
        context_classes=DEFAULT_CONTEXT_CLASSES,
    ):
        self.mode = _report.check_mode(mode)
        self.helper_modules = tuple(helper_modules)
        self.divergence = divergence
        self.divergence_timeout = divergence_timeout
        self.group_classes = tuple(group_classes)
        self.context_classes = tuple(context_classes)
        self._start = 0
        self.violations: list[Violation] = []

    def __enter__(self):
        self._start = len(VIOLATIONS)
        if not _SHIM:
            shim = _Shim(
                self.mode,
                self.helper_modules,
                self.divergence,
                self.divergence_timeout,
                self.group_classes,
                self.context_classes,
            )
            shim.install()
            _SHIM.append(shim)
            self._owner = True
        else:
            self._owner = False
            self._outer_mode = _SHIM[-1].mode
            _SHIM[-1].mode = self.mode
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()
        self.violations = VIOLATIONS[self._start :]
        if self._owner:
            shim = _SHIM.pop()
            shim.uninstall()
        else:
            _SHIM[-1].mode = self._outer_mode
        return False


def violations() -> list[Violation]:
    """Every violation recorded in this process so far."""
    return list(VIOLATIONS)


def clear_violations() -> None:
    VIOLATIONS.clear()
    _SEEN.clear()
