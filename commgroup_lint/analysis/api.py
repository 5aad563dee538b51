"""What a qualified name means: the profile's entries, overridden by scanned definitions.

Profile entries are matched exactly, or, inside one of the profile's packages, by the
final name (SGLang re-exports its getters from several modules). A `callee().attr` entry
describes an attribute of an object a call returns. Every entry becomes an `Entry`: the
`Behaviour` of calling it, or the value of reading it; the summaries of the scanned code's
own functions are entries of the same shape, installed over the profile's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis.conditions import parse_guarded, parse_relation
from commgroup_lint.analysis.invariants import Invariants
from commgroup_lint.profile import Collective, GroupParam, Profile
from commgroup_lint.profile_objects import ObjectConsumer

T = TypeVar("T")

WORLD = "world"


_MAX_REEXPORTS = 4  # a name re-exported through this many modules is still found


class _Table(Generic[T]):
    def __init__(self, entries: dict[str, T], packages: tuple[str, ...], unrelated: frozenset[str] = frozenset()) -> None:
        self._packages = packages
        self._unrelated = unrelated  # matched by nothing but their exact name
        self._tails: dict[str, str | None] = {}  # name -> its tail key (asked again and again)
        self._exact = dict(entries)
        self._shipped = dict(entries)
        self._shipped_names = frozenset(entries)
        self._by_tail = {key: value for name, value in entries.items() if (key := self.tail_key(name))}
        self._shipped_tails = frozenset(self._by_tail)
        self._shipped_by_tail = {key: name for name in entries if (key := self.tail_key(name))}
        self.replaced: dict[str, str] = {}  # a scanned name installed over a shipped entry -> that entry's name
        self._hidden: set[str] = set()
        self._aliases: dict[str, str] = {}  # `pkg.name` -> `pkg.mod.name`: what a module imports, others import from it
        self._answers: dict[str, T | None] = {}  # what `get` answered since the table last changed

    def tail_key(self, name: str) -> str | None:
        try:
            return self._tails[name]
        except KeyError:
            pass
        key = None
        for package in self._packages:
            if name.startswith(package + "."):
                head, paren, rest = name.partition("(")
                key = f"{package}:{head.rpartition('.')[2]}{paren}{rest}"
                break
        self._tails[name] = key
        return key

    def get(self, name: str) -> T | None:
        # asked hundreds of thousands of times in a run, mostly for names it does not have
        # (`torch.nn.Module`), between few changes: remembered until the next change
        try:
            return self._answers[name]
        except KeyError:
            found = self._answers[name] = self._find(name)
            return found

    def _find(self, name: str) -> T | None:
        for _ in range(_MAX_REEXPORTS):
            if name in self._hidden:
                return None
            found = self._exact.get(name)
            if found is None and name not in self._unrelated and (key := self.tail_key(name)):
                found = None if key in self._hidden else self._by_tail.get(key)
            if found is not None or (name := self._aliases.get(name)) is None:  # type: ignore[assignment]
                return found
        return None

    def add_aliases(self, aliases: dict[str, str]) -> None:
        """Names a module re-exports (`from .utils import f` in a package's `__init__`): a lookup
        of `pkg.f` finds `pkg.utils.f`."""
        self._aliases.update((name, target) for name, target in aliases.items() if name != target)
        self._answers.clear()

    def names(self) -> set[str]:
        return set(self._exact)

    def defined(self) -> dict[str, T]:
        """Every entry by its exact name (not through `get`: not recorded as a lookup)."""
        return self._exact

    def alias(self, name: str) -> str | None:
        return self._aliases.get(name)

    def override(self, entries: dict[str, T]) -> None:
        """Scanned definitions win over shipped entries of the same name. A definition is found by
        its final name elsewhere in the package only when it replaces a shipped entry that is (a
        re-exported API), never for names of its own (two classes' `forward` are two methods)."""
        self._answers.clear()
        for name, value in entries.items():
            shipped = name if name in self._shipped_names else self._shipped_by_tail.get(self.tail_key(name) or "")
            if shipped is not None:
                self.replaced[name] = shipped
            self._exact[name] = value
            self._hidden.discard(name)
            if (key := self.tail_key(name)) and key in self._shipped_tails:
                self._by_tail[key] = value
                self._hidden.discard(key)

    def withdraw(self, names: Iterable[str]) -> None:
        """Scanned definitions `override` installed that no longer hold (a summary that came
        out empty in a later round): each name is what the profile says again, or unknown."""
        self._answers.clear()
        for name in names:
            self.replaced.pop(name, None)
            if name in self._shipped:
                self._exact[name] = self._shipped[name]
            else:
                self._exact.pop(name, None)
            if (key := self.tail_key(name)) and key in self._shipped_tails:
                self._by_tail[key] = self._shipped[self._shipped_by_tail[key]]

    def hide(self, name: str) -> None:
        """A scanned definition says `name` is not what the profile thinks (an old signature)."""
        self._answers.clear()
        shipped = name if name in self._shipped_names else self._shipped_by_tail.get(self.tail_key(name) or "")
        if shipped is not None:
            self.replaced[name] = shipped
        self._exact.pop(name, None)
        self._hidden.add(name)
        if key := self.tail_key(name):
            self._hidden.add(key)


def _arg(p: GroupParam) -> b.ArgRef:
    return b.ArgRef(p.param, p.index, p.shape)


def _fixed(groups: frozenset[str]) -> tuple[tuple[str, frozenset], ...]:
    """Profile groups, each possibly guarded: `attn_tp when tp_size != attn_dp_size`."""
    return tuple(sorted(map(parse_guarded, groups), key=lambda g: (g[0], sorted(g[1]))))


def _binding(p: GroupParam, attr: str | None = None) -> b.Binding:
    default = _fixed(frozenset({p.default})) if p.default else ()
    return b.Binding(param=replace(_arg(p), attr=attr), default=default, required=not p.default)


def _object_consumes(c: ObjectConsumer) -> tuple[b.Consume, ...]:
    """An op that takes a group-bound object consumes it on the group it runs on: its own
    group argument's, else the object's (listed, never a mismatch)."""
    if c.group is None:
        return (b.Consume(_arg(c.object), on_object=_arg(c.object), objects=True),)
    default = _fixed(frozenset({c.group.default})) if c.group.default else ()
    return (b.Consume(_arg(c.object), group=_arg(c.group), default=default, objects=True),)


def _consumes(c: Collective) -> tuple[b.Consume, ...]:
    if c.buffers:
        return tuple(b.Consume(b.ArgRef(bp.param, bp.index), _fixed(bp.groups)) for bp in c.buffers)
    if c.groups:
        return (b.Consume(None, _fixed(c.groups)),)
    assert c.group is not None
    default = _fixed(frozenset({c.group.default})) if c.group.default else ()
    return (b.Consume(None, group=_arg(c.group), default=default),)


def _is_attribute(name: str) -> bool:
    """`pkg.get_parallel().tp_group` names an attribute of a returned object; `pkg.get_tp_group` a callable."""
    return "()." in name


def binds_memory(call: b.Behaviour | None) -> bool:
    """Whether calling it returns memory bound to a group, a context that binds, or registers
    (or keeps) memory bound to a group it is given."""
    return call is not None and bool(
        call.context() or call.registers or call.binds_pools or call.keeps
        or any(isinstance(r, b.PoolContext) for r in call.returns) or _holds_memory(call.returns)
    )


def _holds_memory(returns: Iterable[b.Returned]) -> bool:
    """Memory among what a call returns, alone or in a tuple (`post, comb, y = mhc_pre(...)`)."""
    return any(isinstance(r, b.Memory) or isinstance(r, b.Items) and any(map(_holds_memory, r.items))
               for r in returns)


def profile_entries(p: Profile) -> dict[str, b.Entry]:
    """Every profile entry as the `Entry` the dataflow reads."""
    calls: dict[str, list[b.Returned]] = {}
    values: dict[str, list[b.Returned]] = {}
    effects: dict[str, dict[str, Any]] = {}  # Behaviour's keyword arguments, by entry

    def returns(name: str, item: b.Returned) -> None:
        (values if _is_attribute(name) else calls).setdefault(name, []).append(item)

    for name, groups in p.getters.items():
        variants = tuple((k, _fixed(v)) for k, v in sorted(p.getter_variants.get(name, {}).items()))
        returns(name, b.Groups(_fixed(groups), variants))
    for name, groups in p.attributes.items():
        values.setdefault(name, []).append(b.Groups(_fixed(groups)))
    for name in p.new_groups:
        calls.setdefault(name, []).append(b.NewGroup())
    for name, quantity in p.sizes.items():
        returns(name, b.Size(quantity))
    for name, param in p.wrappers.items():
        calls.setdefault(name, []).append(b.Argument(_arg(param)))
    for name, param in p.allocators.items():
        calls.setdefault(name, []).append(b.Memory(_binding(param), "allocator"))
    for name, builder in p.objects.builders.items():  # an object bound to a group is memory bound to it
        calls.setdefault(name, []).append(b.Memory(_binding(builder.group, builder.attr), "object"))
    for name, ctx in p.contexts.items():
        calls.setdefault(name, []).append(b.Context(_binding(ctx.group), ctx.disabled, ctx.enabled))
    for name, reg in p.registrations.items():
        effects.setdefault(name, {}).setdefault("registers", ())
        effects[name]["registers"] += (b.Register(_arg(reg.buffer), _binding(reg.group)),)
    for name, param in p.pool_contexts.items():
        calls.setdefault(name, []).append(b.PoolContext(_arg(param)))
    for name, binding in p.pool_bindings.items():
        effects.setdefault(name, {})["binds_pools"] = (b.BindPool(_arg(binding.pool), _arg(binding.groups)),)
    for name, collective in p.collectives.items():
        effects.setdefault(name, {})["consumes"] = _consumes(collective)
    for name, consumer in p.objects.consumers.items():
        effects.setdefault(name, {})["consumes"] = _object_consumes(consumer)
    for name in p.local_copies:
        effects.setdefault(name, {})["copies"] = ((b.ArgRef("local_tokens", 0), b.ArgRef("global_tokens", 1)),)
    entries: dict[str, b.Entry] = {}
    for name in {*calls, *values, *effects}:
        call = None
        if name in calls or name in effects:
            call = b.Behaviour(returns=tuple(calls.get(name, ())), **effects.get(name, {}))
        entries[name] = b.Entry(call, tuple(values.get(name, ())))
    return entries


def quantities(p: Profile) -> frozenset[str]:
    """The world sizes a profile names (as `sizes`, `size_attributes` or a group's `size`)."""
    return (frozenset(p.sizes.values()) | frozenset(p.size_attributes.values())
            | frozenset(info.size for info in p.groups.values() if info.size))


class _Computed(_Table[T]):
    """A table whose answers a function computes (set by `use`), recorded like any other's:
    what a star import binds depends on another file than the one analysed."""

    def __init__(self) -> None:
        super().__init__({}, ())
        self._compute: Callable[[str], T | None] | None = None

    def use(self, compute: Callable[[str], T | None] | None) -> None:
        self._compute = compute
        self._answers.clear()

    def _find(self, name: str) -> T | None:
        return self._compute(name) if self._compute is not None else None


@dataclass
class Api:
    """The lookup the dataflow consults for every call and attribute it meets."""

    profile: Profile
    entries: _Table[b.Entry] = field(init=False)
    classes: _Table[tuple] = field(init=False)  # class -> `module.ClassInfo`, scanned
    misuses: _Table[tuple[str, ...]] = field(init=False)  # where a helper binds memory -> callers consuming it elsewhere

    def __post_init__(self) -> None:
        p = self.profile
        # a group whose world size the profile names has one rank when that size is 1
        sized = {group: [f"{info.size} == 1"] for group, info in p.groups.items() if info.size}
        self._single_rank = {
            group: tuple(filter(None, map(parse_relation, [*sized.get(group, ()), *p.single_rank.get(group, ())])))
            for group in {*sized, *p.single_rank}
        }
        self._aliases = {
            (group, other): key
            for group, others in p.aliases.items() for other, relation in others.items()
            if (key := parse_relation(relation))
        }
        for fact in p.facts:  # group identities and one-rank groups stated as facts
            key = parse_relation(fact.when[0]) if fact.when else None
            if key and fact.kind == "same_group":
                self._aliases.setdefault((fact.groups[0], fact.groups[1]), key)
            elif key and fact.kind == "single_rank":
                self._single_rank[fact.groups[0]] = (*self._single_rank.get(fact.groups[0], ()), key)
        self.entries = _Table(profile_entries(p), p.packages, p.unrelated)
        self._shipped = _Table(profile_entries(p), p.packages, p.unrelated)  # never overridden
        self.classes = _Table({}, ())
        self.signatures: _Table[tuple[str, ...]] = _Table({}, ())  # scanned definitions' parameter names
        self.misuses = _Table({}, ())
        self.stars: _Computed[tuple[tuple[str, str], ...]] = _Computed()  # module -> what `from module import *` binds
        self._factory_names = frozenset(name.rpartition(".")[2] for name in p.tensor_factories)
        self._pinned_tails = frozenset(filter(None, map(self.entries.tail_key, p.pinned)))
        self.quantities = quantities(p)
        self.invariants = Invariants(p.facts, self.quantities)
        self.namespaces = frozenset(package.partition(".")[0] for package in p.packages)  # see `module_name_for`
        self._profile_words = self._binding_words()
        self._anchored = self._anchors()
        self.word_anchors: dict[str, frozenset[str]] = dict(self._anchored)  # kept in place: the gate holds it
        self._helper_words: set[str] = set()

    def entry(self, name: str) -> b.Entry | None:
        return self.entries.get(name)

    def call(self, name: str) -> b.Behaviour | None:
        found = self.entries.get(name)
        return found.call if found is not None else None

    def overridable(self, name: str, summary: b.Behaviour) -> bool:
        """Whether the scanned definition's summary replaces the profile's entry for `name`: not
        when the user pinned the entry, nor when the entry binds memory and the summary does not
        (a definition the analysis cannot read through, such as a context class, must not erase
        what the profile knows), nor when the entry builds an object and the summary returns no
        memory (a builder that returns pointers or handles to what it registers: the body says
        which group, only the profile says that the result is the object)."""
        if self.is_pinned(name):
            return False
        shipped = self._shipped.get(name)
        if self.builds_object(name) and summary.allocator() is None:
            return False
        return shipped is None or not binds_memory(shipped.call) or binds_memory(summary)

    def overridden(self) -> list[tuple[str, str, str | None]]:
        """The profile's entries the scanned code replaced, as (entry, scanned definition, where
        it is defined), for profile authors: an entry that differs from the definition it stands
        for is silently not used, unless pinned."""
        found = []
        for name, shipped in sorted(self.entries.replaced.items()):
            current, original = self.entries.get(name), self._shipped.get(shipped)
            if current != original:  # (None: hidden, the definition takes no such parameter)
                found.append((shipped, name, current.call.origin if current is not None and current.call else None))
        return found

    def is_pinned(self, name: str) -> bool:
        """The user's configuration describes `name`: the scanned code's definition does not override it."""
        pinned = self.profile.pinned
        return name in pinned or (key := self.entries.tail_key(name)) is not None and key in self._pinned_tails

    def builds_object(self, name: str) -> bool:
        """Whether the profile says `name` builds an object bound to a group (`[objects.builders]`):
        what its scanned definition returns is that object, whatever group the body binds it to."""
        shipped = self._shipped.get(name)
        return shipped is not None and shipped.call is not None and any(
            isinstance(r, b.Memory) and r.how == "object" for r in shipped.call.returns)

    def is_tensor_factory(self, name: str) -> bool:
        return name.rpartition(".")[2] in self._factory_names

    def is_same_group_attribute(self, name: str) -> bool:
        return name in self.profile.same_group_attributes

    def single_rank(self, group: str) -> tuple[str, ...]:
        """The relations (canonical keys) under each of which `group` has one rank."""
        return self._single_rank.get(group, ())

    def alias(self, a: str, b_: str) -> str | None:
        """The relation under which groups `a` and `b_` are one group object, if any."""
        return self._aliases.get((a, b_)) or self._aliases.get((b_, a))

    @property
    def helper_words(self) -> set[str]:
        """The final names of the scanned code's helpers that bind memory (set by the index)."""
        return self._helper_words

    def set_helper_words(self, words: set[str], methods: dict[str, set[str]]) -> None:
        """The scanned code's memory-binding helpers callable by name (`words`, their final
        names). A word that names only static or class methods (`methods`: word -> the classes
        defining it) is reached through its class (`NDTensor.allocate(...)`): it counts only in
        a file that names that class or a scanned subclass of it too, so that the gate skips
        the files that say `allocate` about something else (FlashInfer's kernels: hundreds)."""
        self._helper_words = words
        self.word_anchors.clear()  # a helper of that name is named by its own name alone
        self.word_anchors.update((w, a) for w, a in self._anchored.items() if w not in words)
        plain = self._profile_words - self._anchored.keys()  # the profile's own: never anchored
        for word, classes in methods.items():
            if word in words and word not in plain:
                self.word_anchors[word] = self._class_names(classes) | self._anchored.get(word, frozenset())

    def _class_names(self, classes: set[str]) -> frozenset[str]:
        """The final names of `classes` and of every scanned class deriving from one of them."""
        below: dict[str, list[str]] = {}
        for name, info in self.classes.defined().items():
            for base in info[0]:
                below.setdefault(base, []).append(name)
        found, pending = set(), list(classes)
        while pending:
            cls = pending.pop()
            if cls not in found:
                found.add(cls)
                pending += below.get(cls, ())
        return frozenset(name.rpartition(".")[2] for name in found)

    def allocation_words(self) -> set[str]:
        """The final names of every call that binds memory: the profile's, and the scanned code's
        helpers callable by name (`helper_words`, from the index). Only a file naming one can
        hold a finding (the gate)."""
        return self._profile_words | self.helper_words

    def method_word_owners(self) -> list[tuple[frozenset[str], frozenset[str]]]:
        """For each engine profile (not the base one) declaring methods that bind memory to
        their receiver's group (TransformerEngine's `ub.get_buffer`), those method names and the
        names one of whose mention in the run means the engine's objects can exist there: the
        final names of its getters, builders, allocators and contexts, and its packages' roots."""
        owners = []
        for part in self.profile.components[1:]:
            words = part.methods.allocator | part.methods.register_pool | part.objects.allocator_methods
            if words:
                names = [*part.getters, *part.allocators, *part.contexts, *part.pool_contexts, *part.objects.names()]
                finals = {n.partition("(")[0].rpartition(".")[2] for n in names}
                owners.append((frozenset(words), frozenset(finals | {d.partition(".")[0] for d in part.detect})))
        return owners

    def forget_method_words(self, words: set[str]) -> None:
        """`words` name no method of an object of this run (see `method_word_owners`): the gate
        leaves them out, unless something else binds memory under that name too."""
        base = self.profile.components[0]
        kept = base.methods.allocator | base.methods.register_pool | base.objects.allocator_methods
        self._profile_words -= (words - kept - self._function_words)

    def _anchors(self) -> dict[str, frozenset[str]]:
        """For a binding call whose final name another API shares (the profile's `unrelated`:
        the store's `rendezvous` is not symmetric memory's), the names of its module a file must
        also name to count as naming it: the gate then skips every file that says `rendezvous`
        about something else."""
        shared = {name.rpartition(".")[2] for name in self.profile.unrelated}
        anchors: dict[str, set[str]] = {}
        for name in self.entries.names():
            word = name.partition("(")[0].rpartition(".")[2]
            module = name.partition("(")[0].rpartition(".")[0]
            entry = self.entries.get(name)
            if word in shared and module and entry is not None and binds_memory(entry.call):
                anchors.setdefault(word, set()).add(module.rpartition(".")[2])
        return {word: frozenset(found) for word, found in anchors.items()}

    def _binding_words(self) -> set[str]:
        return (self._function_words | set(self.profile.methods.allocator) | set(self.profile.methods.register_pool)
                | set(self.profile.objects.allocator_methods))

    @property
    def _function_words(self) -> set[str]:
        """The final names of the profile's functions and classes that bind memory."""
        words = set()
        for name in self.entries.names():
            entry = self.entries.get(name)
            if entry is not None and binds_memory(entry.call):
                words.add(name.partition("(")[0].rpartition(".")[2])
        return words
