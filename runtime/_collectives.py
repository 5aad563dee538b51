"""Checks at the collectives, and nowhere else: no other torch call pays for the shim.

* ``torch.distributed`` collectives are wrapped as attributes of ``torch.distributed`` and
  ``distributed_c10d``.
* A name imported before the shim was installed still reaches the collective itself, which
  hands itself to torch's function-mode machinery through ``distributed_c10d``'s globals
  ``has_torch_function`` and ``handle_torch_function``: the shim replaces both, so such a call
  is checked, then runs (a real function mode or tensor subclass still gets it after the check).
  torch 2.11's list ``reduce_scatter`` and ``broadcast`` do not hand themselves over.
* Functional collectives and symmetric-memory ops (``torch.ops._c10d_functional``,
  ``torch.ops.symm_mem``: what compiled code and DTensor call) take their group by name: each
  gets a CPU and a CUDA kernel that checks the call, then runs the kernel it replaced. Compiled
  code is checked when it runs, a CUDA graph when it is captured (its replays run no host code).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist

from ._check import checked
from ._imports import say
from ._patch import Patcher
from ._state import TLS, Active

#: torch.distributed functions that run a collective, by the name torch gives them, mapped to
#: the name users know (torch 2.13 runs all_gather_into_tensor/reduce_scatter_tensor as
#: all_gather_single/reduce_scatter_single).
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

#: Op namespaces whose ops with a ``group_name`` argument are collectives on that group.
OP_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "symm_mem")
# point-to-point ops, and symmetric memory's queries of a group's peers (no data moves)
_NOT_COLLECTIVES = frozenset({"isend", "irecv", "batch_p2p_ops", "_rendezvous", "get_remote_tensors"})
_KEYS = ("CPU", "CUDA")

Spec = tuple[str, "int | None", Callable[..., Any]]  # (name users know, group position, body)


def collective_specs() -> dict[Callable[..., Any], Spec]:
    """``public function -> (name, group position, body)`` for this torch's collectives;
    ``body`` is the function under its decorators (logging, deprecation), which have run by
    the time the call is handed over."""
    c10d = dist.distributed_c10d
    specs = {}
    for attr, name in COLLECTIVE_NAMES.items():
        func = getattr(c10d, attr, None)
        if func is not None:
            specs[func] = (name, _position(func, "group"), inspect.unwrap(func))
    return specs


def _remaps() -> dict[Any, Any]:
    """torch.compile's table of the collectives it rewrites into functional ones."""
    from torch.distributed import _functional_collectives

    return _functional_collectives.traceable_collective_remaps


def _position(func: Callable[..., Any], name: str) -> int | None:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # pragma: no cover - a builtin
        return None
    return params.index(name) if name in params else None


def _unchecked(body: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    TLS.depth += 1
    try:
        return body(*args, **kwargs)
    finally:
        TLS.depth -= 1


class CollectiveHooks:
    """Installs the three hooks above; ``uninstall`` (with the patcher's restore) undoes them."""

    def __init__(self, patcher: Patcher) -> None:
        self.patcher = patcher
        self.libraries: list[Any] = []

    def install(self) -> None:
        specs = collective_specs()
        # A collective's body names itself to handle_torch_function through the module's
        # globals, where it now finds the wrapper: the wrappers are known to the hook too.
        wrappers = {self._wrap_attribute(func, spec): spec for func, spec in specs.items()}
        self._hook_dispatch({**specs, **wrappers})
        self._hook_ops()

    def uninstall(self) -> None:
        for library in self.libraries:
            library._destroy()
        self.libraries.clear()

    def _hook_dispatch(self, specs: dict[Callable[..., Any], Spec]) -> None:
        c10d = dist.distributed_c10d
        orig_has, orig_handle = c10d.has_torch_function, c10d.handle_torch_function

        def has_torch_function(relevant_args: Any) -> bool:
            if Active.shim is not None and not TLS.depth:
                return True
            return orig_has(relevant_args)


        bodies = {public: checked(body, name, position) for public, (name, position, body) in specs.items()}

        def handle_torch_function(public: Any, relevant_args: Any, *args: Any, **kwargs: Any) -> Any:
            body = bodies.get(public)
            if Active.shim is None or TLS.depth or body is None:
                if orig_has(relevant_args):
                    return orig_handle(public, relevant_args, *args, **kwargs)
                return _unchecked(inspect.unwrap(public), args, kwargs)
            return body(*args, **kwargs)

        self.patcher.set(c10d, "has_torch_function", has_torch_function)
        self.patcher.set(c10d, "handle_torch_function", handle_torch_function)

    def _wrap_attribute(self, func: Callable[..., Any], spec: Spec) -> Callable[..., Any]:
        name, position, _ = spec
        collective = functools.wraps(func)(checked(func, name, position))
        for module in (dist.distributed_c10d, dist):
            if getattr(module, func.__name__, None) is func:
                self.patcher.set(module, func.__name__, collective)
        # torch.compile rewrites the collectives it knows into functional ones (checked by
        # their kernels when the compiled code runs); it must know the wrapper as the original.
        remaps = _remaps()
        if func in remaps:
            self.patcher.set_item(remaps, collective, remaps[func])
        return collective

    def _hook_ops(self) -> None:
        get_kernel = getattr(torch.library, "get_kernel", None)
        if get_kernel is None:
            say(f"torch {torch.__version__} has no torch.library.get_kernel: functional and "
                "symmetric-memory collectives (torch.compile'd code) are not checked")
            return
        libraries: dict[str, Any] = {}
        unchecked: list[str] = []
        # torch registers some symmetric-memory kernels from Python (the fused matmul ones): the
        # shim's stacks on top of them (older torch refuses that, and those ops go unchecked)
        override = {"allow_override": True} if "allow_override" in inspect.signature(
            torch.library.Library.impl).parameters else {}
        with warnings.catch_warnings():  # replacing a CUDA kernel is announced by a warning
            warnings.simplefilter("ignore")
            for namespace, op, name, position in _group_name_ops():
                qualified = f"{namespace}::{op}"
                for key in _KEYS:
                    if not torch._C._dispatch_has_computed_kernel_for_dispatch_key(qualified, key):
                        continue
                    if namespace not in libraries:
                        libraries[namespace] = torch.library.Library(namespace, "IMPL")
                    kernel = _op_kernel(_original(qualified, key, get_kernel), name, position)
                    try:
                        libraries[namespace].impl(op, kernel, key, with_keyset=True, **override)
                    except RuntimeError:
                        unchecked.append(f"{qualified} ({key})")
        self.libraries.extend(libraries.values())
        if unchecked:
            say("not checked (this torch lets no one replace kernels it registers from Python): "
                + ", ".join(unchecked))


@functools.cache
def _group_name_ops() -> tuple[tuple[str, str, str, int], ...]:
    """``(namespace, op[.overload], name users know, position of group_name)`` for every op of
    ``OP_NAMESPACES`` with a ``group_name``: a point-to-point op is not a collective."""
    return tuple(_scan_ops())


def _scan_ops() -> Iterator[tuple[str, str, str, int]]:
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, op = qualified.partition("::")
        if namespace not in OP_NAMESPACES:
            continue
        base, _, overload = op.partition(".")
        if base in _NOT_COLLECTIVES:
            continue
        params = [a.name for a in torch._C._get_schema(f"{namespace}::{base}", overload).arguments]
        if "group_name" in params:
            name = base.rstrip("_").removesuffix("_out")
            yield namespace, op, name, params.index("group_name")


def _original(qualified: str, key: str, get_kernel: Callable[..., Any]) -> Callable[..., Any]:
    """How to call the kernel the shim's replaces: ``call(keyset, *args, **kwargs)``.

    The functional collectives' kernel is their CompositeExplicitAutograd one, called through
    the dispatcher for that key, which releases the GIL as any op call does: a gloo worker
    thread may need it before the collective completes (held, as ``call_boxed`` holds it, the
    ranks deadlock). A kernel registered for the device itself (symmetric-memory ops on
    CUDA, which call nothing back) is called as it was retrieved."""
    if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd"):
        namespace, _, op = qualified.partition("::")
        base, _, overload = op.partition(".")
        packet = getattr(getattr(torch.ops, namespace), base)
        call = functools.partial(getattr(packet, overload or "default")._op_dk,
                                 torch._C.DispatchKey.CompositeExplicitAutograd)
        return lambda keyset, *args, **kwargs: call(*args, **kwargs)
    return get_kernel(qualified, key).call_boxed


def _op_kernel(call: Callable[..., Any], name: str, position: int) -> Callable[..., Any]:
    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if Active.shim is None or TLS.depth:
            return call(keyset, *args, **kwargs)
        return checked(functools.partial(call, keyset), name, position, "group_name")(*args, **kwargs)

    return kernel
