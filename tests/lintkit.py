"""Shared helpers for the linter's tests (a plain module: `conftest` names clash across folders)."""

from __future__ import annotations

from pathlib import Path

from commgroup_lint.engine import Linter
from commgroup_lint.model import Confidence, Finding, RuleSelection
from commgroup_lint.config import Config, configured_profile
from commgroup_lint.discovery import discover
from commgroup_lint.rule import all_rules

FIXTURES = Path(__file__).parent / "fixtures"
EVERY_RULE = ("CGL", *(r.code for r in all_rules().rules if r.opt_in))
"""A selection that runs every rule, the opt-in ones (`Rule.opt_in`) included."""
PROFILE = configured_profile(Config())
"""What a run without a configuration uses: every shipped profile."""


def lint_paths(*paths: Path | str, select: tuple[str, ...] = ("CGL",),
               min_confidence: Confidence = Confidence.MEDIUM) -> list[Finding]:
    linter = Linter(PROFILE, RuleSelection(select), min_confidence=min_confidence)
    return linter.lint(discover([str(p) for p in paths])).findings


def lint_text(tmp_path: Path, text: str, name: str = "snippet.py", select: tuple[str, ...] = ("CGL",),
              min_confidence: Confidence = Confidence.MEDIUM) -> list[Finding]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return lint_paths(path, select=select, min_confidence=min_confidence)


# A gather whose buffer misses its group, and the same after `--fix` (the group of the gather).
FIXABLE = (
    "from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer\n"
    "\n"
    "\n"
    "def gather(hidden_states, forward_batch):\n"
    "    gathered = get_global_dp_buffer()\n"
    "    dp_gather_partial(gathered, hidden_states, forward_batch)\n"
    "    return gathered\n"
)
FIXED = (
    "from sglang.srt.layers.dp_attention import dp_gather_partial, get_global_dp_buffer\n"
    "from sglang.srt.distributed import get_tp_group\n"
    "\n"
    "\n"
    "def gather(hidden_states, forward_batch):\n"
    "    gathered = get_global_dp_buffer(get_tp_group())\n"
    "    dp_gather_partial(gathered, hidden_states, forward_batch)\n"
    "    return gathered\n"
)
