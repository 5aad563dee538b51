"""Programs whose path from a binding to its consumer passes 1 to 6 tests, generated (fixed seeds),
each test written in one of several spellings, with the condition a finding must print.

A test is an atom (a module-level flag, an attribute of `self`, a helper predicate, a relation of
world sizes, a mode of a parameter) possibly negated, and a spelling: a nested `if`, an early
return, a ternary choosing the buffer, a conjunction `and`, a double negation through `or`, or a
method, given the test's value as a parameter, that tests it and holds the rest of the path. The expected
condition is the conjunction of the tests as the source states them, each as `display_literal`
writes it, plus the relation that makes the two groups two (`attn_tp_size != tp_size`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HEADER = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_attention_dp_size, "
    "get_local_dp_buffer\n"
    "from acme.env import read_flag, read_mode\n"
    "\n"
)

SPELLINGS = ("if", "return", "ternary", "and", "or", "helper")


@dataclass(frozen=True)
class Atom:
    code: str  # how the source writes it
    shown: str  # how the condition shows it when it holds
    negated_shown: str  # and when it does not


def _atoms(i: int) -> list[Atom]:
    return [
        Atom(f"_FLAG_{i}", f"_FLAG_{i}", f"not _FLAG_{i}"),
        Atom(f"self.use_{i}", f"self.use_{i}", f"not self.use_{i}"),
        Atom(f"enabled_{i}()", f"enabled_{i}()", f"not enabled_{i}()"),
        Atom(f"get_attention_dp_size() > {i}", f"attn_dp_size > {i}", f"attn_dp_size <= {i}"),
        Atom(f"batch.mode_{i}.is_max_len()", f"batch.mode_{i}.is_max_len()", f"not batch.mode_{i}.is_max_len()"),
        # a helper predicate whose body the analysis reads: the condition shows the call and what it means
        Atom(f"dp_size_over_{i}()", f"dp_size_over_{i}() and attn_dp_size > {i}",
             f"not dp_size_over_{i}() and attn_dp_size <= {i}"),
    ]


@dataclass(frozen=True)
class Program:
    source: str
    line: int  # the binding's line (where the finding is reported)
    expected: frozenset[str]  # the conjuncts of the printed condition


def generate(seed: int) -> Program:
    rng = random.Random(seed)
    depth = rng.randint(1, 6)
    helpers: list[str] = []
    module: list[str] = []
    expected = {"attn_tp_size != tp_size"}
    body: list[str] = ["    def forward(self, x, batch):", "        out = get_local_dp_buffer(get_tp_group())"]
    methods: list[list[str]] = []
    indent = "        "
    tests = []
    sized = False  # one relation of world sizes per path: two could exclude each other
    for i in range(depth):
        atom = rng.choice([a for a in _atoms(i + 1) if not (sized and "size" in a.code)])
        sized |= "size" in atom.code
        holds = rng.random() < 0.6
        tests.append((atom, holds, rng.choice(SPELLINGS)))
        if atom.code.startswith("_FLAG"):
            module.append(f"{atom.code} = read_flag('{atom.code}')")
        elif atom.code.startswith("enabled"):
            helpers.append(f"def {atom.code[:-2]}():\n    return read_mode().{atom.code[:-2]}\n")
        elif atom.code.startswith("dp_size_over"):
            helpers.append(f"def {atom.code[:-2]}():\n    return get_attention_dp_size() > {i + 1}\n")
    consumer = "attn_tp_all_gather_into_tensor(out, x)"
    for n, (atom, holds, spelling) in enumerate(tests):
        expected.update((atom.shown if holds else atom.negated_shown).split(" and "))
        test = atom.code if holds else f"not {atom.code}"
        if spelling == "if":
            body.append(f"{indent}if {test}:")
            indent += "    "
        elif spelling == "return":
            body.append(f"{indent}if {_negate(atom.code, holds)}:")
            body.append(f"{indent}    return None")
        elif spelling == "ternary":
            body.append(f"{indent}out = out if {test} else torch_empty()")
        elif spelling == "and":
            body.append(f"{indent}if {test} and x is not None:")
            indent += "    "
            expected.add("x is not None")
        elif spelling == "or":
            body.append(f"{indent}if not ({_negate(atom.code, holds)} or x is None):")
            indent += "    "
            expected.add("x is not None")
        else:  # a method of the layer, given the test's value as a flag, tests it and goes on
            name = f"_step_{n}"
            body.append(f"{indent}return self.{name}(out, x, batch, {test})")
            methods.append(body)
            body = [f"    def {name}(self, out, x, batch, flag):", "        if flag:"]
            indent = "            "
    body.append(f"{indent}{consumer}")
    methods.append(body)
    source = HEADER + "\n".join(module) + "\n\n" + "\n".join(helpers) + "\n\n" + "def torch_empty():\n    return None\n\n\n"
    source += "class Layer:\n" + "\n\n".join("\n".join(m) for m in methods) + "\n"
    line = source.splitlines().index("        out = get_local_dp_buffer(get_tp_group())") + 1
    return Program(source, line, frozenset(expected))


def _negate(code: str, holds: bool) -> str:
    """The test an early return takes to leave the path where `code` holds as `holds` says."""
    return f"not {code}" if holds else code
