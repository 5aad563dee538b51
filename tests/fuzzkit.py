"""Fuzzing support shared by tests/test_fuzz.py (a few hundred programs, fixed seeds) and
scripts/fuzz.py (any count or time).

Programs come from pysource-codegen (random valid Python), hypothesmith (in the test), and the
project's own real-looking code (examples/, tests/fixtures/); each is then mutated by inserting
allocator and collective calls, and their imports, before random statements. The engine must
never raise and never report an internal error; `--fix` (unsafe fixes included) must produce
text that parses, keeps every comment, and is a fixed point (fixing it again changes nothing).
"""

from __future__ import annotations

import ast
import io
import random
import tempfile
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from lintkit import PROFILE

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIRS = (ROOT / "examples", ROOT / "tests" / "fixtures")

# Statements inserted at random statement positions (indented to match). Some are only valid in a
# function (`return`, `self.`), some rebind an allocator's name: the engine must cope with all.
SNIPPETS = (
    "from sglang.srt.layers.dp_attention import get_local_dp_buffer, get_global_dp_buffer, dp_gather_partial",
    "from sglang.srt.layers.dp_attention import get_attention_tp_group, dp_scatter",
    "from sglang.srt.distributed import get_tp_group, get_moe_ep_group",
    "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory",
    "import sglang.srt.layers.dp_attention as dpa",
    "from sglang.srt.layers.dp_attention import get_local_dp_buffer as gldb",
    "buf = get_local_dp_buffer()",
    "buf = get_local_dp_buffer(get_tp_group())",
    "buf = get_local_dp_buffer(group=get_attention_tp_group())",
    "buf = gldb(get_moe_ep_group())",
    "buf = dpa.get_local_dp_buffer()",
    "buf, other = get_global_dp_buffer(), buf",
    "self.buf = get_local_dp_buffer(get_attention_tp_group())",
    "get_tp_group().all_reduce(buf)",
    "get_attention_tp_group().all_reduce(buf)",
    "dp_gather_partial(buf, other, forward_batch)",
    "dp_scatter(buf, other, forward_batch)",
    "tensor_model_parallel_all_reduce(buf)  # a comment that must survive --fix",
    "with use_symmetric_memory(get_tp_group()):\n    buf = torch.empty(4)",
    "with use_symmetric_memory(get_attention_tp_group()) as sm:\n    buf = torch.empty(4)\n    sm.tag(buf)",
    "if get_tensor_model_parallel_world_size() == get_attention_dp_size():\n    buf = get_local_dp_buffer()",
    "group = get_tp_group() if flag else get_attention_tp_group()",
    "buf = get_local_dp_buffer(group)",
    "return get_local_dp_buffer()",
    "def get_local_dp_buffer(group=None):\n    return torch.empty(1)",
    "get_local_dp_buffer = None",
    "del buf",
    "for buf in [get_local_dp_buffer()]:\n    get_tp_group().all_reduce(buf)",
)


@cache
def corpus() -> tuple[str, ...]:
    """Real-looking code: the bundled example and the fixtures (those in UTF-8)."""
    texts = []
    for path in sorted(p for d in CORPUS_DIRS for p in d.rglob("*.py")):
        try:
            texts.append(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            continue  # a fixture about encodings; the bad-input tests cover those
    return tuple(texts)


def generated_program(seed: int, node_limit: int = 300) -> str | None:
    """A random valid program from pysource-codegen (None when its unparser gives up)."""
    from pysource_codegen import generate

    try:
        return generate(seed, node_limit=node_limit, depth_limit=8)
    except Exception:  # noqa: BLE001 - a generator bug, not ours (e.g. f-string backslashes in 3.11's unparse)
        return None


def statement_lines(text: str) -> list[tuple[int, int]]:
    """(0-based line, indentation) of every statement that starts its own line and can have a
    statement inserted before it; empty if the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines(keepends=True)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or getattr(node, "decorator_list", None):
            continue
        line = lines[node.lineno - 1] if node.lineno - 1 < len(lines) else ""
        prefix = line[: node.col_offset]
        if prefix.strip() == "" and prefix.isascii() and not _inside_string_continuation(lines, node.lineno - 1):
            found.add((node.lineno - 1, node.col_offset))
    return sorted(found)


def _inside_string_continuation(lines: list[str], index: int) -> bool:
    """A statement line right after a line ending in a backslash is part of that line."""
    return index > 0 and lines[index - 1].rstrip("\r\n").endswith("\\")


def mutate(text: str, rng: random.Random, insertions: int | None = None) -> str:
    """Insert allocator/collective snippets before random statements (and at the end)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    newline = "\r\n" if "\r\n" in text else "\n"
    positions = statement_lines(text) or [(len(lines), 0)]
    count = insertions if insertions is not None else rng.randint(1, 6)
    chosen = sorted((rng.choice(positions + [(len(lines), 0)]) for _ in range(count)), reverse=True)
    for index, indent in chosen:
        snippet = rng.choice(SNIPPETS)
        block = "".join(" " * indent + part + newline for part in snippet.split("\n"))
        lines.insert(index, block)
    return "".join(lines)


@dataclass
class Outcome:
    programs: int = 0
    parsed: int = 0
    findings: Counter = field(default_factory=Counter)
    fixed_files: int = 0
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, detail, program)

    def add(self, other: "Outcome") -> None:
        self.programs += other.programs
        self.parsed += other.parsed
        self.findings += other.findings
        self.fixed_files += other.fixed_files
        self.failures += other.failures


def comments(text: str) -> Counter:
    try:
        return Counter(t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return Counter()


def parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _lint_text(text: str, directory: Path):
    path = directory / "program.py"
    path.write_text(text, encoding="utf-8", newline="")
    linter = Linter(PROFILE)
    return linter, linter.lint(discover([str(path)]))


def check_program(text: str, fix: bool = True) -> Outcome:
    """Lint one program (and fix it, when the fixer exists); every misbehaviour is a failure."""
    out = Outcome(programs=1, parsed=int(parses(text)))
    with tempfile.TemporaryDirectory(prefix="cgl-fuzz-") as tmp:
        directory = Path(tmp)
        try:
            linter, result = _lint_text(text, directory)
        except BaseException as err:  # noqa: BLE001
            if isinstance(err, KeyboardInterrupt):
                raise
            out.failures.append(("crash", f"{type(err).__name__}: {err}", text))
            return out
        out.findings.update(f.code for f in result.findings)
        for e in result.internal_errors:
            out.failures.append(("internal error", f"{e.rule}: {e.error}", text))
        if fix and fixer_available() and not result.internal_errors:
            _check_fix(linter, result, text, directory, out)
    return out


def fixer_available() -> bool:
    try:
        import commgroup_lint.fixer  # noqa: F401
    except ImportError:
        return False
    return True


def _check_fix(linter: Linter, result, text: str, directory: Path, out: Outcome) -> None:
    from commgroup_lint.fixer import fix_result

    try:
        report = fix_result(linter, result, result.fixable, unsafe=True)
    except Exception as err:  # noqa: BLE001
        out.failures.append(("fix crash", f"{type(err).__name__}: {err}", text))
        return
    for path, reason in report.failures:
        out.failures.append(("fix failure", reason, text))
    for fixed in report.files:
        out.fixed_files += 1
        if not parses(fixed.text):
            out.failures.append(("fix does not parse", "", text))
            continue
        lost = comments(text) - comments(fixed.text)
        if lost:
            out.failures.append(("fix lost comments", repr(sorted(lost)), text))
        try:
            linter2, result2 = _lint_text(fixed.text, directory)
            again = fix_result(linter2, result2, result2.fixable, unsafe=True)
        except Exception as err:  # noqa: BLE001
            out.failures.append(("fix crash on fixed text", f"{type(err).__name__}: {err}", text))
            continue
        if result2.internal_errors:
            out.failures.append(("internal error on fixed text", str(result2.internal_errors[0]), text))
        if any(f.text != fixed.text for f in again.files):
            out.failures.append(("fix not idempotent", "a second --fix changed the fixed text", text))


def program_for(seed: int, source: str) -> str | None:
    """The program a seed stands for: `generated` (pysource-codegen, then mutated) or `corpus`
    (a real-looking file, mutated)."""
    rng = random.Random(seed)
    if source == "generated":
        text = generated_program(seed)
        return None if text is None else mutate(text, rng)
    files = corpus()
    return mutate(files[rng.randrange(len(files))], rng)
