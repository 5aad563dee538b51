"""Metamorphic programs: one seed bug (or its clean twin), its values sent down random routes.

A *seed* is a group-bound buffer and the collective that consumes it, in one engine's style.
A *rewrite* sends one of three values (the buffer, the group the buffer is bound to, the group of
the collective) through a construct of Python that does not change what it is: a helper, a
container, an attribute, a closure, a `with`, a `match`, a generator... Chains of rewrites
compose. Whatever the chain, the bug's finding must stay (same code, at the binding's line in
the rewritten program) and the clean twin must stay clean. The binding line is found through
its marker comment, so rewrites that add lines need no line map of their own.

`tests/test_metamorphic.py` runs fixed-seed batches; `scripts/metamorphic_report.py` prints how
each rewrite fares alone (the constructs the model does not follow yet among them).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.model import Confidence, RuleSelection

MARK = "# <binding>"
VALUES = ("buffer", "bound_group", "used_group")


@dataclass
class Program:
    """The program being built: module-level definitions, the step's statements, other modules."""

    method: bool  # the step is a method of a class (`self` is there to hold values)
    module: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    modules: dict[str, list[str]] = field(default_factory=dict)
    is_async: bool = False
    counter: int = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}_{self.counter}"

    def define(self, lines: list[str]) -> None:
        self.module += [*lines, ""]


Rewrite = Callable[[Program, str], str]
"""Takes the program and an expression, adds what it needs, returns an equivalent expression."""


def _helper(p: Program, e: str) -> str:
    f = p.fresh("_pass")
    p.define([f"def {f}(value):", "    return value"])
    return f"{f}({e})"


def _helper_in_other_module(p: Program, e: str) -> str:
    f = p.fresh("forward")
    module = p.fresh("helpers")
    p.modules[module] = [f"def {f}(value):", "    return value"]
    p.module.insert(0, f"from {module} import {f}")
    return f"{f}({e})"


def _tuple(p: Program, e: str) -> str:
    t = p.fresh("pair")
    p.body.append(f"{t} = ({e}, None)")
    return f"{t}[0]"


def _unpack(p: Program, e: str) -> str:
    a = p.fresh("first")
    p.body.append(f"{a}, _rest = {e}, None")
    return a


def _list(p: Program, e: str) -> str:
    items = p.fresh("items")
    p.body.append(f"{items} = [None, {e}]")
    return f"{items}[1]"


def _dict(p: Program, e: str) -> str:
    d = p.fresh("table")
    p.body.append(f"{d} = {{'key': {e}}}")
    return f"{d}['key']"


def _lambda(p: Program, e: str) -> str:
    g = p.fresh("get")
    p.body.append(f"{g} = lambda: {e}")
    return f"{g}()"


def _closure(p: Program, e: str) -> str:
    g = p.fresh("inner")
    p.body += [f"def {g}():", f"    return {e}"]
    return f"{g}()"


def _walrus(p: Program, e: str) -> str:
    w = p.fresh("held")
    p.body += [f"if ({w} := {e}) is None:", "    raise RuntimeError('unreachable')"]
    return w


def _keyword_only(p: Program, e: str) -> str:
    f = p.fresh("_keyword")
    p.define([f"def {f}(*, value):", "    return value"])
    return f"{f}(value={e})"


def _star_args(p: Program, e: str) -> str:
    f = p.fresh("_star")
    p.define([f"def {f}(*values):", "    return values[0]"])
    return f"{f}(*[{e}])"


def _star_kwargs(p: Program, e: str) -> str:
    f = p.fresh("_double_star")
    p.define([f"def {f}(value=None):", "    return value"])
    return f"{f}(**{{'value': {e}}})"


def _default_argument(p: Program, e: str) -> str:
    f = p.fresh("_defaulted")
    p.define([f"def {f}(value, scale=1):", "    return value"])
    return f"{f}({e})"


def _instance_attribute(p: Program, e: str) -> str:
    c = p.fresh("Box")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value"])
    return f"{c}({e}).value"


def _property(p: Program, e: str) -> str:
    c = p.fresh("Holder")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self._value = value", "",
              "    @property", "    def value(self):", "        return self._value"])
    return f"{c}({e}).value"


def _staticmethod(p: Program, e: str) -> str:
    c = p.fresh("Helpers")
    p.define([f"class {c}:", "    @staticmethod", "    def keep(value):", "        return value"])
    return f"{c}.keep({e})"


def _classmethod(p: Program, e: str) -> str:
    c = p.fresh("Maker")
    p.define([f"class {c}:", "    @classmethod", "    def keep(cls, value):", "        return value"])
    return f"{c}.keep({e})"


def _inherited_method(p: Program, e: str) -> str:
    base, child = p.fresh("Base"), p.fresh("Child")
    p.define([f"class {base}:", "    def keep(self, value):", "        return value", "", "",
              f"class {child}({base}):", "    pass"])
    return f"{child}().keep({e})"


def _callable_object(p: Program, e: str) -> str:
    c = p.fresh("Forward")
    p.define([f"class {c}:", "    def __call__(self, value):", "        return value"])
    return f"{c}()({e})"


def _decorated(p: Program, e: str) -> str:
    d, f = p.fresh("_traced"), p.fresh("_kept")
    p.define(["import functools", "", "", f"def {d}(fn):", "    @functools.wraps(fn)",
              "    def wrapper(*args, **kwargs):", "        return fn(*args, **kwargs)", "    return wrapper", "", "",
              f"@{d}", f"def {f}(value):", "    return value"])
    return f"{f}({e})"


def _generator(p: Program, e: str) -> str:
    g = p.fresh("_produce")
    p.define([f"def {g}(value):", "    yield value"])
    return f"next({g}({e}))"


def _comprehension(p: Program, e: str) -> str:
    return f"[v for v in [{e}]][0]"


def _for_loop(p: Program, e: str) -> str:
    v = p.fresh("each")
    p.body += [f"for {v} in [{e}]:", "    pass"]
    return v


def _if_else(p: Program, e: str) -> str:
    v = p.fresh("chosen")
    p.body += ["if n > 0:", f"    {v} = {e}", "else:", f"    {v} = {e}"]
    return v


def _conditional_expression(p: Program, e: str) -> str:
    return f"({e} if n >= 0 else {e})"


def _try_finally(p: Program, e: str) -> str:
    v = p.fresh("tried")
    p.body += ["try:", f"    {v} = {e}", "finally:", "    pass"]
    return v


def _try_except(p: Program, e: str) -> str:
    v = p.fresh("caught")
    p.body += ["try:", f"    {v} = {e}", "except RuntimeError:", "    raise"]
    return v


def _with_as(p: Program, e: str) -> str:
    v = p.fresh("entered")
    p.module.insert(0, "import contextlib")
    p.body += [f"with contextlib.nullcontext({e}) as {v}:", "    pass"]
    return v


def _class_manager(p: Program, e: str) -> str:
    c, v = p.fresh("Scope"), p.fresh("inside")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value", "",
              "    def __enter__(self):", "        return self.value", "",
              "    def __exit__(self, *exc):", "        return False"])
    p.body += [f"with {c}({e}) as {v}:", "    pass"]
    return v


def _generator_manager(p: Program, e: str) -> str:
    f, v = p.fresh("_scoped"), p.fresh("given")
    p.module.insert(0, "import contextlib")
    p.define(["@contextlib.contextmanager", f"def {f}(value):", "    yield value"])
    p.body += [f"with {f}({e}) as {v}:", "    pass"]
    return v


def _exit_stack(p: Program, e: str) -> str:
    stack, v = p.fresh("stack"), p.fresh("stacked")
    p.module.insert(0, "import contextlib")
    p.body += [f"with contextlib.ExitStack() as {stack}:",
               f"    {v} = {stack}.enter_context(contextlib.nullcontext({e}))"]
    return v


def _base_in_other_module(p: Program, e: str) -> str:
    base, child, module = p.fresh("Base"), p.fresh("Derived"), p.fresh("bases")
    p.modules[module] = [f"class {base}:", "    def keep(self, value):", "        return value"]
    p.module.insert(0, f"from {module} import {base}")
    p.define([f"class {child}({base}):", "    pass"])
    return f"{child}().keep({e})"


def _match_capture(p: Program, e: str) -> str:
    v = p.fresh("matched")
    p.body += [f"match {e}:", f"    case {v}:", "        pass"]
    return v


def _await(p: Program, e: str) -> str:
    f = p.fresh("_later")
    p.define([f"async def {f}(value):", "    return value"])
    p.is_async = True
    return f"(await {f}({e}))"


def _or_none(p: Program, e: str) -> str:
    return f"({e} or None)"


def _self_attribute(p: Program, e: str) -> str:
    if not p.method:
        return e
    a = p.fresh("kept")
    p.body.append(f"self.{a} = {e}")
    return f"self.{a}"


def _slice(p: Program, e: str) -> str:
    items = p.fresh("head")
    p.body.append(f"{items} = [{e}, None][:1]")
    return f"{items}[0]"


def _getattr_builtin(p: Program, e: str) -> str:
    c = p.fresh("Carrier")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value"])
    return f"getattr({c}({e}), 'value')"


def _setattr_builtin(p: Program, e: str) -> str:
    h = p.fresh("spot")
    p.module.insert(0, "import types")
    p.body += [f"{h} = types.SimpleNamespace()", f"setattr({h}, 'value', {e})"]
    return f"{h}.value"


def _namespace(p: Program, e: str) -> str:
    p.module.insert(0, "import types")
    return f"types.SimpleNamespace(value={e}).value"


def _dataclass(p: Program, e: str) -> str:
    c = p.fresh("Record")
    p.module.insert(0, "import dataclasses")
    p.define(["@dataclasses.dataclass", f"class {c}:", "    value: object", "    extra: int = 0"])
    return f"{c}({e}).value"


def _namedtuple(p: Program, e: str) -> str:
    c = p.fresh("Entry")
    p.module.insert(0, "import collections")
    p.define([f"{c} = collections.namedtuple({c!r}, ['value', 'extra'])"])
    return f"{c}({e}, 0).value"


def _typed_namedtuple(p: Program, e: str) -> str:
    c = p.fresh("Typed")
    p.module.insert(0, "import typing")
    p.define([f"class {c}(typing.NamedTuple):", "    extra: int", "    value: object"])
    return f"{c}(0, value={e})[1]"


def _partial(p: Program, e: str) -> str:
    f = p.fresh("_bound")
    p.module.insert(0, "import functools")
    p.define([f"def {f}(value, scale):", "    return value"])
    return f"functools.partial({f}, {e})(1)"


def _enumerate(p: Program, e: str) -> str:
    v = p.fresh("numbered")
    p.body += [f"for _i, {v} in enumerate([{e}]):", "    pass"]
    return v


def _zip(p: Program, e: str) -> str:
    v = p.fresh("zipped")
    p.body += [f"for {v}, _other in zip([{e}], [None]):", "    pass"]
    return v


def _dict_get(p: Program, e: str) -> str:
    return f"{{'key': {e}}}.get('key')"


def _dict_items(p: Program, e: str) -> str:
    v = p.fresh("item")
    p.body += [f"for _key, {v} in {{'key': {e}}}.items():", "    pass"]
    return v


def _dict_values(p: Program, e: str) -> str:
    return f"list({{'key': {e}}}.values())[0]"


def _append(p: Program, e: str) -> str:
    items = p.fresh("gathered")
    p.body += [f"{items} = []", f"{items}.append({e})"]
    return f"{items}[-1]"


def _setitem(p: Program, e: str) -> str:
    d = p.fresh("slots")
    p.body += [f"{d} = {{}}", f"{d}['key'] = {e}"]
    return f"{d}['key']"


def _super_call(p: Program, e: str) -> str:
    base, child = p.fresh("Parent"), p.fresh("Heir")
    p.define([f"class {base}:", "    def keep(self, value):", "        return value", "", "",
              f"class {child}({base}):", "    def keep(self, value):", "        return super().keep(value)"])
    return f"{child}().keep({e})"


def _nonlocal(p: Program, e: str) -> str:
    v, put = p.fresh("shared"), p.fresh("put")
    p.body += [f"{v} = None", f"def {put}():", f"    nonlocal {v}", f"    {v} = {e}", f"{put}()"]
    return v


def _global(p: Program, e: str) -> str:
    g = p.fresh("KEPT").upper()
    p.define([f"{g} = None"])
    p.body += [f"global {g}", f"{g} = {e}"]
    return g


def _tuple_return(p: Program, e: str) -> str:
    f = p.fresh("_paired")
    p.define([f"def {f}(value):", "    return value, None"])
    return f"{f}({e})[0]"


def _star_unpack(p: Program, e: str) -> str:
    v = p.fresh("leading")
    p.body.append(f"{v}, *_tail = [{e}, None, None]")
    return v


def _fluent(p: Program, e: str) -> str:
    c = p.fresh("Builder")
    p.define([f"class {c}:", "    def set(self, value):", "        self.value = value", "        return self"])
    return f"{c}().set({e}).value"


def _lambda_default(p: Program, e: str) -> str:
    return f"(lambda value={e}: value)()"


def _while_loop(p: Program, e: str) -> str:
    v = p.fresh("looped")
    p.body += ["while True:", f"    {v} = {e}", "    break"]
    return v


def _annotated(p: Program, e: str) -> str:
    v = p.fresh("typed")
    p.body.append(f"{v}: object = {e}")
    return v


def _cast(p: Program, e: str) -> str:
    p.module.insert(0, "import typing")
    return f"typing.cast(typing.Any, {e})"


def _class_attribute(p: Program, e: str) -> str:
    c = p.fresh("Slot")
    p.define([f"class {c}:", "    value = None"])
    p.body.append(f"{c}.value = {e}")
    return f"{c}.value"


def _async_with(p: Program, e: str) -> str:
    c, v = p.fresh("AsyncScope"), p.fresh("awaited")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value", "",
              "    async def __aenter__(self):", "        return self.value", "",
              "    async def __aexit__(self, *exc):", "        return False"])
    p.body += [f"async with {c}({e}) as {v}:", "    pass"]
    p.is_async = True
    return v


def _async_for(p: Program, e: str) -> str:
    g, v = p.fresh("_stream"), p.fresh("streamed")
    p.define([f"async def {g}(value):", "    yield value"])
    p.body += [f"async for {v} in {g}({e}):", "    pass"]
    p.is_async = True
    return v


def _dict_comprehension(p: Program, e: str) -> str:
    return f"{{k: v for k, v in [('key', {e})]}}['key']"


def _generator_expression(p: Program, e: str) -> str:
    return f"next(v for v in [{e}])"


def _yield_from(p: Program, e: str) -> str:
    g = p.fresh("_delegate")
    p.define([f"def {g}(value):", "    yield from [value]"])
    return f"next({g}({e}))"


def _kwargs_collector(p: Program, e: str) -> str:
    f = p.fresh("_collect")
    p.define([f"def {f}(**options):", "    return options['value']"])
    return f"{f}(value={e})"


def _forwarding_wrapper(p: Program, e: str) -> str:
    inner, outer = p.fresh("_inner"), p.fresh("_outer")
    p.define([f"def {inner}(value, scale=1):", "    return value", "", "",
              f"def {outer}(*args, **kwargs):", f"    return {inner}(*args, **kwargs)"])
    return f"{outer}({e}, scale=2)"


def _bound_method(p: Program, e: str) -> str:
    c, m = p.fresh("Keeper"), p.fresh("keep")
    p.define([f"class {c}:", "    def keep(self, value):", "        return value"])
    p.body.append(f"{m} = {c}().keep")
    return f"{m}({e})"


def _alternate_constructor(p: Program, e: str) -> str:
    c = p.fresh("Made")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value", "",
              "    @classmethod", "    def create(cls, value):", "        return cls(value)"])
    return f"{c}.create({e}).value"


def _getitem_object(p: Program, e: str) -> str:
    c = p.fresh("Bag")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self.value = value", "",
              "    def __getitem__(self, index):", "        return self.value"])
    return f"{c}({e})[0]"


def _cached_property(p: Program, e: str) -> str:
    c = p.fresh("Lazy")
    p.module.insert(0, "import functools")
    p.define([f"class {c}:", "    def __init__(self, value):", "        self._value = value", "",
              "    @functools.cached_property", "    def value(self):", "        return self._value"])
    return f"{c}({e}).value"


def _try_else(p: Program, e: str) -> str:
    v = p.fresh("settled")
    p.body += ["try:", "    pass", "except RuntimeError:", "    raise", "else:", f"    {v} = {e}"]
    return v


def _reassign(p: Program, e: str) -> str:
    a, b_ = p.fresh("alias"), p.fresh("again")
    p.body += [f"{a} = {e}", f"{b_} = {a}"]
    return b_


def _list_concat(p: Program, e: str) -> str:
    return f"([None] + [{e}])[1]"


def _setter(p: Program, e: str) -> str:
    c, h = p.fresh("Store"), p.fresh("store")
    p.define([f"class {c}:", "    def __init__(self):", "        self.value = None", "",
              "    def put(self, value):", "        self.value = value"])
    p.body += [f"{h} = {c}()", f"{h}.put({e})"]
    return f"{h}.value"


def _staticmethod_on_instance(p: Program, e: str) -> str:
    c = p.fresh("Tools")
    p.define([f"class {c}:", "    @staticmethod", "    def keep(value):", "        return value"])
    return f"{c}().keep({e})"


def _global_getter(p: Program, e: str) -> str:
    g, setter, getter = p.fresh("_HELD").upper(), p.fresh("_keep"), p.fresh("_held")
    p.define([f"{g} = None", "", "", f"def {setter}(value):", f"    global {g}", f"    {g} = value", "", "",
              f"def {getter}():", f"    return {g}"])
    p.body.append(f"{setter}({e})")
    return f"{getter}()"


def _reexported(p: Program, e: str) -> str:
    package, f = p.fresh("pkg"), p.fresh("relay")
    p.modules[f"{package}/impl"] = [f"def {f}(value):", "    return value"]
    p.modules[f"{package}/__init__"] = [f"from .impl import {f}"]
    p.module.insert(0, f"from {package} import {f}")
    return f"{f}({e})"


def _cached_getter(p: Program, e: str) -> str:
    f = p.fresh("_memo")
    p.module.insert(0, "import functools")
    p.define(["@functools.lru_cache(maxsize=None)", f"def {f}(value):", "    return value"])
    return f"{f}({e})"


def _property_setter(p: Program, e: str) -> str:
    c, h = p.fresh("Slotted"), p.fresh("slotted")
    p.define([f"class {c}:", "    def __init__(self):", "        self._value = None", "",
              "    @property", "    def value(self):", "        return self._value", "",
              "    @value.setter", "    def value(self, value):", "        self._value = value"])
    p.body += [f"{h} = {c}()", f"{h}.value = {e}"]
    return f"{h}.value"


def _frozen_dataclass(p: Program, e: str) -> str:
    c = p.fresh("Frozen")
    p.module.insert(0, "import dataclasses")
    p.define(["@dataclasses.dataclass(frozen=True)", f"class {c}:", "    value: object",
              "    extra: int = dataclasses.field(default=0)"])
    return f"{c}(value={e}).value"


def _nested_function_returning_closure(p: Program, e: str) -> str:
    f = p.fresh("_make")
    p.define([f"def {f}(value):", "    def get():", "        return value", "    return get"])
    return f"{f}({e})()"


def _method_chain_in_other_module(p: Program, e: str) -> str:
    c, module = p.fresh("Relay"), p.fresh("relays")
    p.modules[module] = [f"class {c}:", "    def __init__(self, value):", "        self.value = value", "",
                         "    def get(self):", "        return self.value"]
    p.module.insert(0, f"from {module} import {c}")
    return f"{c}({e}).get()"


def _dict_update(p: Program, e: str) -> str:
    d = p.fresh("options")
    p.body += [f"{d} = {{}}", f"{d}.update(key={e})"]
    return f"{d}['key']"


def _conditional_import_alias(p: Program, e: str) -> str:
    f = p.fresh("_same")
    p.define([f"def {f}(value):", "    return value", "", "", f"{f}_alias = {f}"])
    return f"{f}_alias({e})"


def _star_imported_helper(p: Program, e: str) -> str:
    f, module, relay = p.fresh("relay"), p.fresh("starred"), p.fresh("reexports")
    p.modules[module] = [f"def {f}(value):", "    return value"]
    p.modules[relay] = [f"from {module} import *"]  # a chain: the helper reaches the program through two
    p.module.insert(0, f"from {relay} import *")
    return f"{f}({e})"


REWRITES: dict[str, Rewrite] = {
    name.removeprefix("_"): rewrite for name, rewrite in dict(globals()).items()
    if name.startswith("_") and callable(rewrite) and rewrite.__module__ == __name__
    and rewrite.__code__.co_varnames[:2] == ("p", "e")
}

NOT_FOLLOWED: frozenset[str] = frozenset({"namedtuple", "setter", "global_getter", "reexported",
                                         "nested_function_returning_closure"})
"""Rewrites the analysis does not follow yet (alone, on at least one value and seed), left out
of the chains: `scripts/metamorphic_report.py` shows where each loses its findings."""

FOLLOWED = tuple(sorted(set(REWRITES) - NOT_FOLLOWED))


@dataclass(frozen=True)
class Seed:
    """One engine's way to bind a buffer and consume it: `{bound}`/`{used}` are the groups,
    `{buffer}` the buffer as the collective receives it."""

    name: str
    imports: tuple[str, ...]
    groups: tuple[str, str]  # (bound group, another group over which the bug runs)
    bind: tuple[str, ...]
    consume: str


SEEDS = (
    Seed("torch", ("import torch", "import torch.distributed as dist",
                   "import torch.distributed._symmetric_memory as symm_mem"),
         ("dist.new_group([0, 1])", "dist.new_group([0, 1])"),
         ("buf = symm_mem.empty(n, device='cuda')", "symm_mem.rendezvous(buf, {bound})  " + MARK),
         "dist.all_reduce({buffer}, group={used})"),
    Seed("vllm", ("import torch",
                  "from vllm.distributed.device_communicators.pynccl_allocator import nccl_symm_mem_context",
                  "from vllm.distributed.parallel_state import get_ep_group, get_tp_group"),
         ("get_tp_group()", "get_ep_group()"),
         ("with nccl_symm_mem_context({bound}.device_communicator.pynccl_comm):  " + MARK, "    buf = torch.empty(n)"),
         "{used}.all_reduce({buffer})"),
    Seed("megatron", ("import torch", "from megatron.core import parallel_state",
                      "from megatron.core.nccl_allocator import create_nccl_mem_pool, nccl_mem"),
         ("parallel_state.get_tensor_model_parallel_group()", "parallel_state.get_expert_model_parallel_group()"),
         ("pool = create_nccl_mem_pool()", "with nccl_mem(pool, group={bound}):  " + MARK, "    buf = torch.zeros(n)"),
         "torch.distributed.all_reduce({buffer}, group={used})"),
)


@dataclass(frozen=True)
class Case:
    """One program to build: a seed, a frame, and a chain of rewrites per value."""

    seed: Seed
    method: bool
    chains: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # per VALUES
    bug: bool

    def describe(self) -> str:
        routes = ", ".join(f"{v}: {' > '.join(c)}" for v, c in zip(VALUES, self.chains) if c) or "no rewrite"
        frame = "method" if self.method else "function"
        return f"{self.seed.name} {'bug' if self.bug else 'clean'} in a {frame}; {routes}"


def render(case: Case) -> dict[str, str]:
    """The program's files, by module name (`step` holds the seed)."""
    seed = case.seed
    p = Program(case.method)
    bound_chain, buffer_chain, used_chain = case.chains[1], case.chains[0], case.chains[2]
    p.body += [f"first = {seed.groups[0]}", f"second = {seed.groups[1]}"]
    bound = "first"
    for name in bound_chain:
        bound = REWRITES[name](p, bound)
    p.body += [line.format(bound=bound) for line in seed.bind]
    buffer = "buf"
    for name in buffer_chain:
        buffer = REWRITES[name](p, buffer)
    used = "second" if case.bug else "first"
    for name in used_chain:
        used = REWRITES[name](p, used)
    p.body += [seed.consume.format(buffer=buffer, used=used), "return None"]
    step = "async def step" if p.is_async else "def step"
    if case.method:
        lines = [*seed.imports, *p.module, "", "", "class Model:", f"    {step}(self, n):", *("        " + s for s in p.body)]
    else:
        lines = [*seed.imports, *p.module, "", "", f"{step}(n):", *("    " + s for s in p.body)]
    files = {"step": "\n".join(lines) + "\n"}
    files.update({name: "\n".join(body) + "\n" for name, body in p.modules.items()})
    return files


def binding_line(text: str) -> int:
    """The line a CGL002 finding is reported at: the binding (the context, the registration)."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.endswith(MARK))


class Checker:
    """Lints each rendered program in a folder of its own, under one profile."""

    def __init__(self, folder: Path, profile: object) -> None:
        self.folder = folder
        self.profile = profile
        self.count = 0
        self.unknowns = 0  # what the last program's run left unknown, as `coverage` counts it

    def findings(self, case: Case) -> tuple[list[tuple[str, int]], str]:
        files = render(case)
        self.count += 1
        folder = self.folder / f"case{self.count}"  # a new path for each program: nothing stale
        folder.mkdir()
        for name, text in files.items():
            path = folder / f"{name}.py"  # `pkg/impl`: a module of a package
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        # a linter of its own: what one program's run learns must not reach the next
        linter = Linter(self.profile, RuleSelection(("CGL002",)), min_confidence=Confidence.MEDIUM)  # type: ignore[arg-type]
        result = linter.lint(discover([str(folder)]))
        self.unknowns = result.groups_unknown + result.memory_lost
        return sorted((f.code, f.start.line) for f in result.findings if f.path.endswith("step.py")), files["step"]

    def holds(self, case: Case) -> tuple[bool, str]:
        """Whether the case keeps its expected findings; and the program, to show when not."""
        found, text = self.findings(case)
        expected = [("CGL002", binding_line(text))] if case.bug else []
        return found == expected, text


def random_case(rng: random.Random, rewrites: tuple[str, ...], bug: bool, longest: int = 4) -> Case:
    chains = tuple(tuple(rng.choice(rewrites) for _ in range(rng.randint(0, longest))) for _ in VALUES)
    return Case(rng.choice(SEEDS), rng.random() < 0.5, chains, bug)  # type: ignore[arg-type]


def minimise(case: Case, fails: Callable[[Case], bool]) -> Case:
    """Drop rewrites one at a time while the case still fails (a failure shown small)."""
    changed = True
    while changed:
        changed = False
        for v in range(len(VALUES)):
            for i in range(len(case.chains[v])):
                chains = list(case.chains)
                chains[v] = chains[v][:i] + chains[v][i + 1:]
                smaller = Case(case.seed, case.method, tuple(chains), case.bug)  # type: ignore[arg-type]
                if fails(smaller):
                    case, changed = smaller, True
                    break
            if changed:
                break
    if case.method and fails(Case(case.seed, False, case.chains, case.bug)):
        case = Case(case.seed, False, case.chains, case.bug)
    return case
