"""Path conditions: `if` tests as literals, so exclusive branches can be told apart and a
finding can say under which configuration it holds.

A literal is `(key, holds)`. The key is the canonical text of a relation (`a == b`, `a < b`,
`a is b`, `a in b`) or of a truthy operand. Each operand carries its scope as a prefix, so a
literal keeps its meaning exactly as far as its scope reaches:

- `#q` a world size the profile names (`#tp_size`): meaningful everywhere;
- `@pkg.mod.name...` a module-level object, by its qualified name: meaningful everywhere;
- `self.x...` an attribute of the method's own object: meaningful in the class's methods, and
  in a caller once `self` is replaced by the receiver (`self.embed.use_attn_tp_group`);
- `$i:name...` the function's parameter at position `i`: a call substitutes its argument;
- `~name...` a local variable: meaningful in its own function only;
- a Python constant (`1`, `None`, `'x'`).

A call's operand holds its arguments' operands, each between `ARG` and `END`
(`@acme.cp.cp_active(\x0e$0:batch\x0f)`): the literal means what the call means only while each
argument means what it did, so it is translated, scoped and forgotten with its arguments.

A *choice* literal (`%callee%target%site`, see `choice_key`) says which of several callables
a value called at one place holds: the choice was made elsewhere, under a condition the
analysis does not carry, so a path that needs one is of unknown feasibility.

A *disjunction* literal (`|...`, see `disjunction`) holds when one of its parts (each a
conjunction of literals) does: what `A or B` says when true and `A and B` when false, kept so
that a condition is never weaker than the path's tests.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from commgroup_lint.analysis import ir

Literal = tuple[str, bool]
PathCondition = frozenset[Literal]
Branches = tuple[frozenset[Literal], frozenset[Literal]]

QUANTITY, GLOBAL, PARAM, LOCAL = "#", "@", "$", "~"
SELF = "self"
CHOICE = "%"
DISJ = "|"
_PARTS, _ITEMS = "\x1c", "\x1d"  # between a disjunction's parts, between a part's literals
ARG, END = "\x0e", "\x0f"  # around an operand that is a call's argument

# Each relation as (canonical operator, operands swapped, negated): everything is written with
# `==`, `is`, `in` or `<`, so a condition and its negation share one key.
_CANONICAL = {
    "==": ("==", False, False), "!=": ("==", False, True),
    "is": ("is", False, False), "is not": ("is", False, True),
    "in": ("in", False, False), "not in": ("in", False, True),
    "<": ("<", False, False), ">=": ("<", False, True),
    ">": ("<", True, False), "<=": ("<", True, True),
}
_NEGATED = {"==": "!=", "is": "is not", "in": "not in", "<": ">="}
_RELATION = re.compile(r"^(.+?) (==|is|in|<) (.+)$")


def relation_key(left: str, op: str, right: str) -> tuple[str, bool]:
    """A canonical text for `left op right` and whether the relation holds as written.

    `a != b` is the negation of `a == b`, `a >= b` of `a < b`, `a <= b` of `b < a`; symmetric
    relations sort their operands, so `attn_dp_size == tp_size` and `tp_size == attn_dp_size`
    are the same condition.
    """
    op, swapped, negated = _CANONICAL[op]
    if swapped:
        left, right = right, left
    if op in ("==", "is") and right < left:
        left, right = right, left
    return f"{left} {op} {right}", not negated


def split_relation(key: str) -> tuple[str, str, str] | None:
    if key.startswith(DISJ):
        return None
    found = _RELATION.match(key)
    return (found.group(1), found.group(2), found.group(3)) if found else None


def parse_literal(text: str) -> Literal | None:
    """A relation between world sizes written in a profile, e.g. `tp_size != attn_dp_size`
    (bare names are quantities, numbers are constants), as a literal."""
    for op in ("!=", "==", "<=", ">=", "<", ">"):  # two-character operators first
        left, found, right = text.partition(f" {op} ")
        if found:
            return relation_key(_quantity(left.strip()), op, _quantity(right.strip()))
    return None


def parse_relation(text: str) -> str | None:
    """The canonical key of a relation that holds as written (`tp_size == attn_dp_size`)."""
    literal = parse_literal(text)
    return literal[0] if literal is not None and literal[1] else None


def parse_guarded(text: str) -> tuple[str, PathCondition]:
    """`attn_tp when tp_size != attn_dp_size and attn_tp_size > 1`: a group and its guard."""
    group, _, when = text.partition(" when ")
    literals = [parse_literal(part.strip()) for part in when.split(" and ")] if when else []
    return group.strip(), frozenset(lit for lit in literals if lit is not None)


def _quantity(word: str) -> str:
    return word if word.lstrip("-").isdigit() else QUANTITY + word


def choice_key(callee: str, target: str, site: str) -> str:
    """The key of "the value called as `callee` (an operand) at `site` is the callable `target`".
    Two calls of one name are two choices: the name may be bound again between them."""
    return f"{CHOICE}{callee}{CHOICE}{target}{CHOICE}{site}"


def split_choice(key: str) -> tuple[str, str, str] | None:
    """(callee operand, target path, site) of a choice key, else None."""
    if not key.startswith(CHOICE):
        return None
    callee, target, site = key[1:].rsplit(CHOICE, 2)
    return callee, target, site


def disjunction(parts: Iterable[frozenset[Literal]]) -> frozenset[Literal]:
    """The literals that say "one of `parts` holds": nothing when a part is empty (it holds
    whatever the path), the part itself when there is one, else one disjunction literal.
    A part that is a disjunction itself is spread into its parts."""
    spread: set[frozenset[Literal]] = set()
    for part in parts:
        if not part:
            return frozenset()
        inner = split_disjunction(next(iter(part))[0]) if len(part) == 1 and next(iter(part))[1] else None
        spread.update(inner or (part,))
    if len(spread) == 1:
        return spread.pop()
    if not spread:
        return frozenset()
    encoded = sorted(_ITEMS.join(sorted(("+" if holds else "-") + key for key, holds in part)) for part in spread)
    return frozenset({(DISJ + _PARTS.join(encoded), True)})


def split_disjunction(key: str) -> tuple[frozenset[Literal], ...] | None:
    """The parts of a disjunction literal's key, else None."""
    if not key.startswith(DISJ):
        return None
    return tuple(frozenset((item[1:], item[0] == "+") for item in part.split(_ITEMS))
                 for part in key[1:].split(_PARTS))


# operands ------------------------------------------------------------------------------

def constant_operand(value: object) -> str | None:
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    return None


def operand_scope(operand: str) -> str:
    """`#`, `@`, `$`, `~`, `self`, or `const`."""
    if operand.startswith((QUANTITY, GLOBAL, PARAM, LOCAL)):
        return operand[0]
    if operand == SELF or operand.startswith(SELF + "."):
        return SELF
    return "const"


def argument_operand(operand: str) -> str:
    """An argument's operand as a call's operand holds it."""
    return ARG + operand + END


def _argument_spans(operand: str) -> list[tuple[int, int]]:
    """Where the outermost argument operands of `operand` are (each with its markers)."""
    spans, depth, start = [], 0, 0
    for i, c in enumerate(operand):
        if c == ARG:
            if depth == 0:
                start = i
            depth += 1
        elif c == END:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans


def map_arguments(operand: str, change: Callable[[str], str | None], marked: bool = True) -> str | None:
    """`operand` with each outermost argument operand replaced by `change` of it (kept between
    the markers unless `marked` is false); None when one of them has no replacement."""
    if ARG not in operand:
        return operand
    out, last = [], 0
    for start, end in _argument_spans(operand):
        changed = change(operand[start + 1:end - 1])
        if changed is None:
            return None
        out += [operand[last:start], argument_operand(changed) if marked else changed]
        last = end
    return "".join(out) + operand[last:]


def _with_arguments(operand: str) -> tuple[str, ...]:
    """The operand and every argument operand inside it, at any depth."""
    if ARG not in operand:
        return (operand,)
    inner = (_with_arguments(operand[start + 1:end - 1]) for start, end in _argument_spans(operand))
    return (operand, *(o for found in inner for o in found))


def display_operand(operand: str) -> str:
    scope = operand_scope(operand)
    if scope in (QUANTITY, LOCAL):
        shown = operand[1:]
    elif scope == PARAM:
        shown = operand.partition(":")[2]
    elif scope == GLOBAL:
        head, paren, rest = operand[1:].partition("(")
        shown = head.rpartition(".")[2] + paren + rest if paren else _short_global(head)
    else:
        shown = operand
    return map_arguments(shown, display_operand, marked=False) or shown


def _short_global(path: str) -> str:
    """`@sglang.srt.utils._is_hip` -> `_is_hip`; an attribute of a class keeps the class's name
    (`_DpGatheredBufferWrapper._dp_max_padding`)."""
    head, _, name = path.rpartition(".")
    owner = head.rpartition(".")[2]
    return f"{owner}.{name}" if owner[:1].isupper() or owner[1:2].isupper() and owner[0] == "_" else name


def key_operands(key: str) -> tuple[str, ...]:
    parts = split_disjunction(key)
    if parts is not None:
        return tuple(dict.fromkeys(o for part in parts for inner, _ in part for o in key_operands(inner)))
    choice = split_choice(key)
    if choice is not None:
        return (choice[0],)  # the target is a fixed callable: only the callee has a scope
    relation = split_relation(key)
    return (*_with_arguments(relation[0]), *_with_arguments(relation[2])) if relation else _with_arguments(key)


@lru_cache(maxsize=8192)  # a long `elif` chain shows each of its tests in every later branch's condition
def display_literal(literal: Literal) -> str:
    key, holds = literal
    parts = split_disjunction(key)
    if parts is not None:
        shown = " or ".join(sorted(_display_part(part) for part in parts))
        return f"({shown})" if holds else f"not ({shown})"
    choice = split_choice(key)
    if choice is not None:
        return f"{display_operand(choice[0])} {'is' if holds else 'is not'} {choice[1].rpartition('.')[2]}"
    relation = split_relation(key)
    if relation is None:
        text = display_operand(key)
        return text if holds else f"not {text}"
    left, op, right = relation
    if op == "<" and operand_scope(left) == "const" and operand_scope(right) != "const":
        # `1 < attn_dp_size` reads `attn_dp_size > 1`
        return f"{display_operand(right)} {'>' if holds else '<='} {display_operand(left)}"
    if op in ("==", "is") and _fixed_value(left) and not _fixed_value(right):
        left, right = right, left  # `x is not None`, `x.dtype == bfloat16`: as the source writes them
    return f"{display_operand(left)} {op if holds else _NEGATED[op]} {display_operand(right)}"


def _fixed_value(operand: str) -> bool:
    """A constant, or a module-level name that is no call's result (`torch.bfloat16`)."""
    return operand_scope(operand) == "const" or (operand_scope(operand) == GLOBAL and "(" not in operand)


def _display_part(part: frozenset[Literal]) -> str:
    shown = display_condition(part)
    return f"({shown})" if len(part) > 1 else shown


def display_condition(literals: Iterable[Literal]) -> str:
    """`tp_size != attn_dp_size and self.use_attn_tp_group`: size relations first, then the rest."""
    shown = sorted(set(literals), key=lambda lit: (kind(lit[0]) != SIZE, display_literal(lit)))
    return " and ".join(display_literal(lit) for lit in shown)


# kinds of literal ----------------------------------------------------------------------

SIZE, FLAG, DATA, CALLABLE = "size", "flag", "data", "callable"


@lru_cache(maxsize=8192)
def kind(key: str) -> str:
    """What a literal is about: a relation between world sizes (`size`); a flag or mode the code
    sets (`flag`: an attribute of `self`, a module-level value, a parameter used as a boolean);
    data flowing through the function (`data`: a local value, an attribute of an argument, a
    call given one of them); or which of several callables a value holds (`callable`: chosen
    where the analysis cannot say when)."""
    if key.startswith(CHOICE):
        return CALLABLE
    parts = split_disjunction(key)
    if parts is not None:
        kinds = {kind(inner) for part in parts for inner, _ in part}
        return next((k for k in (CALLABLE, FLAG, DATA) if k in kinds), SIZE)
    operands = key_operands(key)
    scopes = [operand_scope(o) for o in operands]
    if QUANTITY in scopes and all(s in (QUANTITY, "const") for s in scopes):
        return SIZE
    for operand, scope in zip(operands, scopes):
        if scope == LOCAL or ARG + LOCAL in operand or ARG + PARAM in operand:
            return DATA
        if scope == PARAM and any(c in operand.partition(":")[2] for c in ".(["):
            return DATA
    return FLAG


def configuration(literals: Iterable[Literal]) -> frozenset[Literal]:
    """The literals that describe a configuration (sizes and flags), not data."""
    return frozenset(lit for lit in literals if kind(lit[0]) != DATA)


# consistency ---------------------------------------------------------------------------

def contradicts(cond: Iterable[Literal]) -> bool:
    """Whether the literals cannot all hold: a key with both values, or bounds on one operand
    that exclude each other (`attn_tp_size == 1` and `1 < attn_tp_size`)."""
    return _contradicts(frozenset(cond))


# Each disjunction is tried part by part against the rest, which holds the other disjunctions:
# without remembering, a condition with d of them costs 2**d checks, asked again for every
# group a consumer could run on (SGLang 0.5.19's decoder layers: minutes).
@lru_cache(maxsize=65536)
def _contradicts(cond: frozenset[Literal]) -> bool:
    if any((key, not holds) in cond for key, holds in cond):
        return True
    return _two_choices(cond) or _bounds_contradict(cond) or _no_part_holds(cond)


def _no_part_holds(cond: frozenset[Literal]) -> bool:
    """Whether a disjunction of the literals has every part excluded by the others."""
    for literal in cond:
        parts = split_disjunction(literal[0]) if literal[1] else None
        if parts is not None:
            rest = cond - {literal}
            if all(_contradicts(rest | part) for part in parts):
                return True
    return False


def simplify(cond: PathCondition) -> PathCondition:
    """The same condition, shorter: a disjunction's parts that the other literals exclude are
    dropped, one that they imply goes, and one left with a single part is that part."""
    out = set(cond)
    for literal in sorted(cond):
        parts = split_disjunction(literal[0]) if literal[1] else None
        if parts is None:
            continue
        rest = out - {literal}
        if any(part <= rest for part in parts):
            out = rest
            continue
        kept = [part for part in parts if not contradicts(rest | part)]
        if kept and len(kept) < len(parts):
            out = rest | disjunction(kept)
    return frozenset(out)


def _two_choices(cond: frozenset[Literal]) -> bool:
    """Whether one called value is said to be two different callables."""
    chosen: dict[tuple[str, str], str] = {}
    for key, holds in cond:
        choice = split_choice(key) if holds else None
        if choice is not None and chosen.setdefault((choice[0], choice[2]), choice[1]) != choice[1]:
            return True
    return False


def _bounds_contradict(cond: frozenset[Literal]) -> bool:
    low: dict[str, int] = {}   # operand >= low
    high: dict[str, int] = {}  # operand <= high
    unequal: dict[str, set[int]] = {}
    for key, holds in cond:
        relation = split_relation(key)
        if relation is None:
            continue
        left, op, right = relation
        number, operand, number_first = _int_side(left, right)
        if number is None or operand is None:
            continue
        if op == "==":
            if holds:
                low[operand] = max(low.get(operand, number), number)
                high[operand] = min(high.get(operand, number), number)
            else:
                unequal.setdefault(operand, set()).add(number)
        elif op == "<":
            # number < operand, or operand < number; negated: >=
            if number_first == holds:  # number < operand  (or not operand < number)
                bound = number + 1 if holds else number
                low[operand] = max(low.get(operand, bound), bound)
            else:  # operand < number  (or not number < operand)
                bound = number - 1 if holds else number
                high[operand] = min(high.get(operand, bound), bound)
    for operand in set(low) | set(high):
        lo, hi = low.get(operand), high.get(operand)
        if operand.startswith(QUANTITY):
            lo = max(lo or 1, 1)  # a world size has at least one rank
        if lo is not None and hi is not None:
            if lo > hi or (lo == hi and lo in unequal.get(operand, ())):
                return True
    return False


def _int_side(left: str, right: str) -> tuple[int | None, str | None, bool]:
    for number_text, operand, first in ((left, right, True), (right, left, False)):
        if number_text.lstrip("-").isdigit() and not operand.lstrip("-").isdigit():
            return int(number_text), operand, first
    return None, None, False


def implies(cond: PathCondition, key: str) -> bool:
    """Whether the literals force the relation to hold (`attn_tp_size <= 1` forces `attn_tp_size == 1`)."""
    return (key, True) in cond or contradicts(cond | {(key, False)})


@dataclass(frozen=True)
class Substitution:
    """How a callee's literals read at one call site: parameters replaced by the arguments'
    operands (or their conditions), `self` by the receiver's operand."""

    # each keyed by the parameter's index (a positional argument) or name (a keyword argument)
    params: dict[int | str, str | None]  # the argument's operand, None if it has none
    param_literals: dict[int | str, Branches]  # the argument's own literals (a flag passed on)
    constants: dict[int | str, object]  # the argument's constant value
    receiver: str | None  # the operand replacing `self`; None: `self` means nothing here
    receiver_flags: dict[str, Branches] = field(default_factory=dict)  # what the receiver's attributes mean

    def apply(self, cond: Iterable[Literal]) -> tuple[frozenset[Literal], bool, bool]:
        """(the literals at the call site, whether some could not be translated, whether
        the callee's condition is false at this call)."""
        out: set[Literal] = set()
        lost = False
        for key, holds in cond:
            parts = split_disjunction(key) if holds else None
            if parts is not None:
                translated_parts = []
                for part in parts:
                    literals, part_lost, impossible = self.apply(part)
                    lost |= part_lost
                    if not impossible:
                        translated_parts.append(literals)
                if not translated_parts:
                    return frozenset(), lost, True
                out |= disjunction(translated_parts)
                continue
            translated = self._literal(key, holds)
            if translated is None:
                lost = True
            elif translated is False:
                return frozenset(), lost, True
            elif translated is not True:
                out |= translated
        return frozenset(out), lost, False

    def _literal(self, key: str, holds: bool) -> set[Literal] | bool | None:
        choice = split_choice(key)
        if choice is not None:
            callee = self._operand(choice[0])
            return None if callee is None else {(choice_key(callee, choice[1], choice[2]), holds)}
        relation = split_relation(key)
        if relation is None:
            param = _bare_param(key)
            if param is not None:
                index = param[0] if param[0] in self.params else param[1]
                if index in self.constants:
                    return bool(self.constants[index]) == holds
                if index in self.param_literals:
                    when_true, when_false = self.param_literals[index]
                    chosen = when_true if holds else when_false
                    if chosen:
                        return set(chosen)
            operand = self._operand(key)
            if operand is None:
                return None
            flag = self.receiver_flags.get(key[len(SELF) + 1:]) if key.startswith(SELF + ".") else None
            return {(operand, holds), *(flag[0] if holds else flag[1])} if flag else {(operand, holds)}
        left, op, right = relation
        left_operand, right_operand = self._operand(left), self._operand(right)
        if left_operand is None or right_operand is None:
            return None
        decided = _evaluate(left_operand, op, right_operand)
        if decided is not None:
            return decided == holds
        new_key, new_holds = relation_key(left_operand, op, right_operand)
        return {(new_key, new_holds if holds else not new_holds)}

    def _operand(self, operand: str) -> str | None:
        scope = operand_scope(operand)
        if scope == PARAM:
            index_text, _, rest = operand[1:].partition(":")
            name_end = next((i for i, c in enumerate(rest) if c in ".(["), len(rest))
            index = int(index_text)
            base = self.params[index] if index in self.params else self.params.get(rest[:name_end].lstrip("*"))
            if base is None:
                return None
            if base.startswith(QUANTITY) and name_end < len(rest):
                return None  # an attribute of a size is not a size
            tail = map_arguments(rest[name_end:], self._operand)
            return None if tail is None else base + tail
        if scope == SELF:
            if self.receiver is None:
                return None
            tail = map_arguments(operand[len(SELF):], self._operand)
            return None if tail is None else self.receiver + tail
        if scope == LOCAL:
            return None
        return map_arguments(operand, self._operand)


def _evaluate(left: str, op: str, right: str) -> bool | None:
    """A relation between two constants, decided (`0 == 2` is false); None otherwise."""
    if operand_scope(left) != "const" or operand_scope(right) != "const":
        return None
    try:
        a, b = ast.literal_eval(left), ast.literal_eval(right)
        if op == "==":
            return a == b
        if op == "is":
            return a is b
        return a in b if op == "in" else a < b
    except (ValueError, SyntaxError, TypeError):
        return None


def mentions(key: str, names: set[str]) -> bool:
    """Whether the literal reads one of the local variables or parameters `names`."""
    for operand in key_operands(key):
        scope = operand_scope(operand)
        if scope == LOCAL:
            base = operand[1:]
        elif scope == PARAM:
            base = operand.partition(":")[2]
        else:
            continue
        name = re.split(r"[.(\[]", base, maxsplit=1)[0]
        if name in names:
            return True
    return False


def _bare_param(key: str) -> tuple[int, str] | None:
    """The index and name of the parameter a key is (`$2:flag`), if it is one."""
    if not key.startswith(PARAM):
        return None
    index_text, _, name = key[1:].partition(":")
    if any(c in name for c in ".(["):
        return None
    return int(index_text), name.lstrip("*")


def render(expr: ir.Expr) -> str | None:
    """A plain text for simple expressions (names, attributes, calls with constant arguments,
    constant subscripts), used where no scope is needed (sibling conventions, groups known only
    by the expression holding them, fix descriptions)."""
    if isinstance(expr, ir.Name):
        return expr.id
    if isinstance(expr, ir.Attr):
        base = render(expr.value)
        return f"{base}.{expr.attr}" if base else None
    if isinstance(expr, ir.Call) and all(isinstance(a.value, ir.Const) and not a.star for a in expr.args):
        base = render(expr.func)
        args = ", ".join((f"{a.keyword}=" if a.keyword else "") + repr(a.value.value) for a in expr.args)  # type: ignore[union-attr]
        return f"{base}({args})" if base else None
    if isinstance(expr, ir.Subscript) and isinstance(expr.index, ir.Const):
        base = render(expr.value)
        return f"{base}[{expr.index.value!r}]" if base else None
    if isinstance(expr, ir.Const):
        return repr(expr.value)
    return None
