"""A generated corpus and a findings digest for the speed tests (gate, cache, front end)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from commgroup_lint.cache import Cache, cache_key
from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter, LintResult
from commgroup_lint.model import RuleSelection
from lintkit import PROFILE

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = sorted([*(ROOT / "examples").rglob("*.py"), *(FIXTURES / "static").glob("*.py")])

ALLOCATIONS = [
    "    buf = get_local_dp_buffer()\n    tensor_model_parallel_all_reduce(buf)\n",
    "    buf = get_global_dp_buffer(get_tp_group())\n    attn_tp_all_gather_into_tensor(buf, x)\n",
    "    buf = get_local_dp_buffer(get_attention_tp_group())\n    dp_gather_partial(buf, x, fb)\n",
    "    with use_symmetric_memory(get_tp_group()):\n        buf = torch.empty(4)\n    tensor_model_parallel_all_reduce(buf)\n",
    "    buf = {helper}(x)\n    attn_tp_all_gather_into_tensor(buf, x)\n",
    "    buf = {helper}(x)\n    tensor_model_parallel_all_reduce(buf)\n",
]
IMPORTS = (
    "import torch\n"
    "from sglang.srt.distributed import get_tp_group, tensor_model_parallel_all_reduce\n"
    "from sglang.srt.layers.dp_attention import (\n"
    "    attn_tp_all_gather_into_tensor, dp_gather_partial, get_attention_tp_group,\n"
    "    get_global_dp_buffer, get_local_dp_buffer,\n)\n"
    "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n"
)
HELPERS = (
    IMPORTS + "\n\n"
    "def scratch(x):\n    return get_global_dp_buffer(get_tp_group())\n\n\n"
    "def attn_scratch(x):\n    return get_local_dp_buffer(get_attention_tp_group())\n\n\n"
    "def plain(x):\n    return torch.empty(4)\n"
)


def generate(root: Path, count: int = 300, seed: int = 0) -> Path:
    """`count` files under `root/gen`: the examples and fixtures with renamed identifiers and
    inserted allocator/collective calls, files that name nothing, and a helpers module that
    several files import (so a change to it must reach them)."""
    rng = random.Random(seed)
    pkg = root / "gen"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPERS)
    seeds = [p.read_text(encoding="utf-8") for p in SEEDS]
    for i in range(count):
        kind = rng.random()
        if kind < 0.3:  # names nothing the gate looks for
            text = f'"""Filler {i}."""\n\n\ndef add_{i}(a, b):\n    return a + b  # all_gather of nothing\n'
        else:
            text = rng.choice(seeds)
            for name in sorted(set(re.findall(r"^\s*def (\w+)", text, re.M)), key=len, reverse=True):
                if not name.startswith("__"):
                    text = re.sub(rf"\b{name}\b", f"{name}_{i}", text)
            if kind < 0.8:
                helper = rng.choice(["scratch", "attn_scratch", "plain"])
                call = rng.choice(ALLOCATIONS).format(helper=helper)
                text += (f"\n\n{IMPORTS}from gen.helpers import {helper}\n\n\n"
                         f"def inserted_{i}(x, fb):\n{call}    return buf\n")
        (pkg / f"mod_{i:03d}.py").write_text(text, encoding="utf-8")
    return pkg


def linter(gate: bool = True, cache_dir: Path | None = None, frontend: str = "ast") -> Linter:
    lint = Linter(PROFILE, RuleSelection(("CGL",)), gate=gate, frontend=frontend)
    if cache_dir is not None:
        lint.cache = Cache(cache_dir, cache_key(*lint.cache_settings()))
    return lint


def digest(result: LintResult) -> tuple:
    """Everything a run reports, fixes included, in a comparable form."""
    findings = tuple(
        (f.code, f.path, f.start, f.end, f.message, f.severity, f.fix) for f in result.findings
    )
    return findings, tuple(sorted(map(repr, result.internal_errors))), result.files_checked


def check(paths: list[Path], **kw) -> tuple:  # noqa: ANN003
    return digest(linter(**kw).lint(discover([str(p) for p in paths])))
