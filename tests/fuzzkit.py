"""Fuzzing support shared by tests/test_fuzz.py (a few hundred programs, fixed seeds) and
scripts/fuzz.py (any count or time).

Programs come from pysource-codegen (random valid Python), hypothesmith (in the test), and the
project's own real-looking code (examples/, tests/fixtures/); each is then mutated by inserting
allocator and collective calls, and their imports, before random statements. The engine must
never raise and never report an internal error; `--fix` (unsafe fixes included) must produce
text that parses, keeps every comment, and is a fixed point (fixing it again changes nothing).

Shapes a red-team found (issue 35) are generated too: long `if`/`elif` chains (never a CGL000:
an `elif` is not a level), hostile file names (every reporter's output stays printable and
parseable), and trees holding non-regular files (a FIFO, a link to `/dev/zero`, a directory
named `x.py`, broken links and loops), which the command must get through in bounded time and
memory, reporting the good file beside them.
"""

from __future__ import annotations

import ast
import io
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import tokenize
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lintkit import PROFILE

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter

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


def files_program(seed: int) -> str:
    """The mutated corpus file a seed stands for."""
    rng = random.Random(seed)
    files = corpus()
    return mutate(files[rng.randrange(len(files))], rng)


def program_for(seed: int, source: str) -> str | None:
    """The program a seed stands for: `generated` (pysource-codegen, then mutated) or `corpus`
    (a real-looking file, mutated)."""
    rng = random.Random(seed)
    if source == "generated":
        text = generated_program(seed)
        return None if text is None else mutate(text, rng)
    return files_program(seed)


# --- shapes ------------------------------------------------------------------------------------

ELIF_IMPORT = "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"


def elif_chain(rng: random.Random) -> str:
    """A function choosing among hundreds to thousands of branches, each allocating (or not),
    nested in `if`s and loops a few levels deep, beside an ordinary function."""
    branches = rng.randint(150, 2500)
    depth = rng.randint(0, 4)
    head = "".join("    " * (i + 1) + f"if flag_{i}:\n" for i in range(depth))
    indent = "    " * (depth + 1)
    arms = "".join(f"{indent}{'if' if i == 0 else 'elif'} x == {i}:\n{indent}    "
                   + ("y = get_local_dp_buffer()\n" if rng.random() < 0.3 else "y = None\n")
                   for i in range(branches))
    tail = f"{indent}else:\n{indent}    y = get_local_dp_buffer()\n" if rng.random() < 0.5 else ""
    return (ELIF_IMPORT + "\n\ndef chain(x):\n" + head + arms + tail + "    return None\n"
            "\n\ndef plain():\n    return get_local_dp_buffer()\n")


def shapes_for(seed: int, trees: bool = False) -> Outcome:
    """The shapes one seed stands for: a hostile name for its corpus program; every 10th seed
    an `elif` chain; with `trees`, every 50th a hostile tree (a subprocess, seconds each)."""
    rng = random.Random(seed)
    total = check_names(files_program(seed), rng)
    if seed % 10 == 0:
        total.add(check_elif_chain(elif_chain(rng)))
    if trees and seed % 50 == 0:
        total.add(check_tree(seed))
    return total


def check_elif_chain(text: str) -> Outcome:
    """A long chain is analysed: findings, never a CGL000 for the file."""
    out = check_program(text, fix=False)
    if out.findings.get("CGL000"):
        out.failures.append(("elif chain lost the file", "a CGL000 on a valid program", text))
    return out


HOSTILE_PARTS = ("\x1b[31m", "\x1b]0;title\x07", "\x07", "\n", "\r", "\t", "\x7f", "\x9b", "[bold]", "[/]",
                 ":100:", " ", "%", ",", "::", "\u2028", "é", "\ufeff", "\udcff")


def hostile_name(rng: random.Random) -> str:
    """A file name a user did not mean to print: escape codes, line breaks, markup, bytes that
    are not UTF-8 (as surrogates), between ordinary characters."""
    parts = [rng.choice(HOSTILE_PARTS) if rng.random() < 0.6 else rng.choice("abc_") for _ in range(rng.randint(1, 6))]
    return "".join(parts) + ".py"


_RAW_CONTROL = set(map(chr, [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)])) | {"\u2028"}


def check_names(text: str, rng: random.Random) -> Outcome:
    """The program's findings, named by a hostile file name, through every reporter: nothing raw
    reaches the output (a line break only between lines), JUnit parses as XML, SARIF as JSON
    with the name's bytes in its URI."""
    from commgroup_lint import terminal
    from commgroup_lint.engine import LintResult
    from commgroup_lint.reporters import MACHINE_FORMATS
    from commgroup_lint.reporters.text import print_findings

    out = Outcome(programs=1, parsed=int(parses(text)))
    name = hostile_name(rng)
    with tempfile.TemporaryDirectory(prefix="cgl-fuzz-") as tmp:
        path = os.path.join(tmp, name)
        try:
            with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write(text)
        except (OSError, ValueError):
            return out  # a name this file system refuses
        try:
            result = Linter(PROFILE).lint(discover([path]))
        except BaseException as err:  # noqa: BLE001
            if isinstance(err, KeyboardInterrupt):
                raise
            out.failures.append(("crash on a hostile name", f"{name!r}: {type(err).__name__}: {err}", text))
            return out
        rendered: dict[str, str] = {}
        try:
            buffer = io.StringIO()
            print_findings(terminal.console("never", buffer), result)
            rendered["text"] = buffer.getvalue()
            for fmt in ("github", "junit", "sarif"):
                rendered[fmt] = MACHINE_FORMATS[fmt](LintResult(**{**result.__dict__}))
            ET.fromstring(rendered["junit"])
            json.loads(rendered["sarif"])
        except Exception as err:  # noqa: BLE001
            out.failures.append(("reporter failed on a hostile name", f"{name!r}: {type(err).__name__}: {err}", text))
            return out
        for fmt, document in rendered.items():
            raw = sorted({c for c in document if c in _RAW_CONTROL or 0xD800 <= ord(c) <= 0xDFFF})
            if raw:
                out.failures.append((f"raw characters in {fmt} output", f"{name!r}: {raw!r}", text))
    return out


GOOD_FILE = ELIF_IMPORT + "\n\ndef forward():\n    return get_local_dp_buffer()\n"
TREE_LIMIT_S = 60
TREE_MEMORY = 4 << 30  # the address space a check of a small tree must fit in


def hostile_tree(directory: Path, rng: random.Random) -> list[str]:
    """Non-regular files named `*.py` beside one good file; returns what was made."""
    (directory / "good.py").write_text(GOOD_FILE, encoding="utf-8")
    makers = {
        "fifo": lambda p: os.mkfifo(p),
        "dev_zero_link": lambda p: os.symlink("/dev/zero", p),
        "directory": lambda p: os.mkdir(p),
        "broken_link": lambda p: os.symlink(str(directory / "missing"), p),
        "link_loop": lambda p: os.symlink(p, p),
        "dev_null_link": lambda p: os.symlink("/dev/null", p),
        "empty": lambda p: open(p, "wb").close(),
    }
    made = []
    for kind in rng.sample(sorted(makers), rng.randint(1, len(makers))):
        try:
            makers[kind](str(directory / f"{kind}.py"))
            made.append(kind)
        except OSError:
            continue
    if rng.random() < 0.3:
        (directory / ".gitignore").symlink_to("/dev/zero")
        made.append("gitignore_to_dev_zero")
    return made


def check_tree(seed: int) -> Outcome:
    """`commgroup-lint check` on a hostile tree ends within TREE_LIMIT_S and TREE_MEMORY, exits
    1 (the good file's finding, CGL000s for the others) with no traceback."""
    out = Outcome(programs=1)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="cgl-fuzz-tree-") as tmp:
        made = hostile_tree(Path(tmp), rng)
        command = [sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "--format", "json", "."]
        try:
            proc = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=TREE_LIMIT_S,
                                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (TREE_MEMORY, TREE_MEMORY)))
        except subprocess.TimeoutExpired:
            out.failures.append(("hang on a hostile tree", f"over {TREE_LIMIT_S} s with {made}", str(made)))
            return out
        found = [f["path"].removeprefix("./") for f in json.loads(proc.stdout or "[]")] if proc.returncode in (0, 1) else []
        if proc.returncode != 1 or "Traceback" in proc.stderr or "good.py" not in found:
            out.failures.append(("hostile tree", f"exit {proc.returncode} with {made}: {proc.stderr[-500:]}", str(made)))
    return out
