"""The index's fixpoint ends: a recursive helper's summary stops growing after a few rounds,
and what a later round withdraws is gone from the `Api` (a warm run then starts exactly where
the cold one ended)."""

from __future__ import annotations

from pathlib import Path

from lintkit import PROFILE, lint_paths

from commgroup_lint.analysis import behaviour as b
from commgroup_lint.analysis.api import Api
from commgroup_lint.analysis.summaries import FunctionEntry, SummaryIndex
from commgroup_lint.analysis.summarise import MAX_DEPTH

RESOLVE = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_reduce, get_local_dp_buffer\n"
    "\n"
    "\n"
    "def resolve(value):\n"
    "    if isinstance(value, dict):\n"
    "        return {resolve(k): resolve(v) for k, v in value.items()}\n"
    "    if isinstance(value, (list, tuple)):\n"
    "        return [resolve(v) for v in value]\n"
    "    return value\n"
    "\n"
    "\n"
    "def step():\n"
    "    attn_tp_all_reduce(resolve(get_local_dp_buffer(get_tp_group())))\n"
)

CHAIN = (
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_reduce, get_local_dp_buffer\n"
    "\n"
    "\n"
    "class Chain:\n"
    "    def __init__(self, group, depth):\n"
    "        self.group = group\n"
    "        self.next = Chain(group, depth - 1) if depth else None\n"
    "\n"
    "\n"
    "def step():\n"
    "    chain = Chain(get_tp_group(), 3)\n"
    "    attn_tp_all_reduce(get_local_dp_buffer(chain.next.group))\n"
)


def _index(tmp_path: Path, text: str) -> tuple[SummaryIndex, str]:
    path = tmp_path / "mod.py"
    path.write_text(text)
    index = SummaryIndex(Api(PROFILE))
    index.build([(path, "mod.py", text)])
    return index, "mod.py"


def _depth(value: object) -> int:
    """How many containers deep a summary's value goes."""
    if isinstance(value, b.Instance):
        return 1 + max((_depth(r) for _, alternatives in value.fields for r in alternatives), default=0)
    if isinstance(value, b.Items):
        return 1 + max((_depth(r) for item in value.items for r in item), default=0)
    if isinstance(value, b.Partial):
        return 1 + max((_depth(r) for _, alternatives in value.args for r in alternatives), default=0)
    return 0


def test_a_recursive_helper_holding_nothing_settles_at_once(tmp_path: Path) -> None:
    index, display = _index(tmp_path, RESOLVE)
    assert len(index.history[display]) <= 2  # its containers hold nothing a caller can use
    assert index.summaries["mod.resolve"].returns == (b.Argument(b.ArgRef("value", 0)),)


def test_a_buffer_through_a_recursive_helper_is_followed(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(RESOLVE)
    findings = lint_paths(tmp_path / "mod.py")
    assert [(f.code, f.start.line, f.start.column) for f in findings] == [("CGL002", 14, 32)]


def test_a_class_holding_itself_settles_within_the_depth(tmp_path: Path) -> None:
    index, display = _index(tmp_path, CHAIN)
    assert len(index.history[display]) <= MAX_DEPTH + 2
    stores = dict(index.summaries["mod.Chain.__init__"].stores)
    assert max(map(_depth, stores["next"])) <= MAX_DEPTH


def test_a_group_held_deep_in_such_a_class_still_reaches_the_check(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(CHAIN)
    findings = lint_paths(tmp_path / "mod.py")
    assert [(f.code, f.start.line, f.start.column) for f in findings] == [("CGL002", 13, 24)]


def _entry(summary: b.Behaviour) -> FunctionEntry:
    return FunctionEntry("mod.helper", ("group",), summary, frozenset(), frozenset(), True)


def test_a_summary_that_comes_out_empty_later_is_withdrawn() -> None:
    index = SummaryIndex(Api(PROFILE))
    returns_tp = b.Behaviour(returns=(b.Groups((("tp", frozenset()),)),))
    index._install_now((_entry(returns_tp),))
    assert index.api.entries.get("mod.helper") == b.Entry(call=returns_tp)
    index._install_now((_entry(b.Behaviour()),))
    assert index.api.entries.get("mod.helper") is None


def test_a_withdrawn_definition_gives_the_profile_its_entry_back() -> None:
    api = Api(PROFILE)
    name = "sglang.srt.distributed.get_tp_group"
    shipped = api.entries.get(name)
    assert shipped is not None
    api.entries.override({name: b.Entry(call=b.Behaviour())})
    assert api.entries.get(name) != shipped
    api.entries.withdraw([name])
    assert api.entries.get(name) == shipped
    assert name not in api.entries.replaced
