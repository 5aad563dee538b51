"""Facts read from the engine's own checks (`[engine_checks]`): validation functions' asserts and
raises, and group initialisers' assignments of one group to another."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.analysis.derived_facts import derived
from commgroup_lint.cli import main
from commgroup_lint.config_facts import EngineChecks

QUANTITIES = frozenset({"tp_size", "attn_dp_size", "attn_tp_size", "attn_cp_size"})
ARGS = textwrap.dedent("""\
    class Args:
        def check_parallelism(self):
            if self.attn_cp_size > 1:
                assert self.attn_dp_size == 1, "context parallelism needs attention DP off"
            if self.tp_size < self.attn_tp_size:
                raise ValueError("attention TP cannot exceed TP")
            if self.enable_dp_attention and self.attn_dp_size > 1:
                assert self.attn_tp_size > 0  # under a flag: no fact
            if self.attn_dp_size == 1:
                return
            assert self.attn_tp_size != self.tp_size, "with attention DP, attention TP is a part of TP"
    """)
INIT = textwrap.dedent("""\
    _TP = None
    _ATTN_CP = None

    def initialize_model_parallel(tensor_model_parallel_size, attn_cp_size):
        global _ATTN_CP
        if attn_cp_size == tensor_model_parallel_size:
            _ATTN_CP = _TP
        else:
            _ATTN_CP = object()
    """)
CHECKS = EngineChecks(("acme.args.Args.*",), ("acme.parallel.initialize_model_parallel",),
                      (("tensor_model_parallel_size", "tp_size"), ("_TP", "tp"), ("_ATTN_CP", "attn_cp")))


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "acme" / "args.py").write_text(ARGS, encoding="utf-8")
    (tmp_path / "acme" / "parallel.py").write_text(INIT, encoding="utf-8")
    return tmp_path


def test_validation_and_initialisers_state_facts(engine: Path) -> None:
    facts = list(derived(CHECKS, sorted(engine.rglob("*.py")), QUANTITIES))
    assert [(f.kind, f.describe(), f.source, f.evidence) for f in facts] == [
        ("implies", "attn_cp_size > 1 implies attn_dp_size == 1", "acme/args.py:Args.check_parallelism",
         'assert self.attn_dp_size == 1, "context parallelism needs attention DP off"'),
        ("never", "never tp_size < attn_tp_size", "acme/args.py:Args.check_parallelism",
         "if self.tp_size < self.attn_tp_size:"),
        ("implies", "attn_dp_size != 1 implies attn_tp_size != tp_size", "acme/args.py:Args.check_parallelism",
         'assert self.attn_tp_size != self.tp_size, "with attention DP, attention TP is a part of TP"'),
        ("same_group", "attn_cp is tp when attn_cp_size == tp_size", "acme/parallel.py:initialize_model_parallel",
         "_ATTN_CP = _TP"),
    ]
    assert all(f.derived and not f.shipped for f in facts)


CONFIG = """\
[tool.commgroup-lint.extend-profile.engine_checks]
validation = ["acme.args.Args.*"]
group_initialisers = ["acme.parallel.initialize_model_parallel"]

[tool.commgroup-lint.extend-profile.engine_checks.names]
tensor_model_parallel_size = "tp_size"
_TP = "tp"
_ATTN_CP = "attn_cp"
"""
USE = textwrap.dedent("""\
    from sglang.srt.distributed import get_tp_group, get_tensor_model_parallel_world_size
    from sglang.srt.layers.dp_attention import (attn_cp_all_gather_into_tensor, get_attention_cp_size,
                                                get_attention_dp_size, get_local_dp_buffer)

    def prefill(x):
        out = get_local_dp_buffer(get_tp_group())
        if get_attention_cp_size() > 1 and get_attention_dp_size() > 1:
            attn_cp_all_gather_into_tensor(out, x)

    def cp_over_all_of_tp(x):
        out = get_local_dp_buffer(get_tp_group())
        if get_attention_cp_size() == get_tensor_model_parallel_world_size():
            attn_cp_all_gather_into_tensor(out, x)

    def cp(x):
        out = get_local_dp_buffer(get_tp_group())
        attn_cp_all_gather_into_tensor(out, x)
    """)


def test_derived_facts_prune_findings_and_stay_without_shipped_facts(engine: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (engine / "use.py").write_text(USE, encoding="utf-8")
    (engine / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(engine)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--no-shipped-facts", "use.py"])
    lines = [line for line in result.output.splitlines() if "CGL" in line]
    assert lines == ["use.py:16:11: CGL002 [*] memory from `get_local_dp_buffer` is bound to group tp but reaches "
                     "`attn_cp_all_gather_into_tensor` on group attn_cp at line 17, when attn_cp_size != tp_size"]
    explained = CliRunner().invoke(main, ["check", "--no-cache", "--explain-facts", "use.py"])
    assert "use.py:6:11: CGL002 removed by fact `acme/args.py:Args.check_parallelism:4`" in explained.output
