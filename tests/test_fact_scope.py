"""A fact may hold in one model's code only (`modules`): what that model's validation enforces
(DeepSeek-V4's context parallelism spans TP) is no fact about another model's paths. An atom
`f(*)` names a helper given any arguments, as a condition now keeps them (issue 28)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.analysis.conditions import ARG, END, relation_key
from commgroup_lint.analysis.invariants import Invariants
from commgroup_lint.cli import main
from commgroup_lint.profile import parse_profile

QUANTITIES = frozenset({"tp_size", "attn_dp_size", "attn_tp_size", "attn_cp_size"})
CP_ACTIVE = (f"@acme.cp.cp_active({ARG}$1:batch{END})", True)
NARROW = (relation_key("#attn_cp_size", "!=", "#tp_size")[0], relation_key("#attn_cp_size", "!=", "#tp_size")[1])


def test_a_scoped_fact_holds_only_in_the_functions_it_names() -> None:
    facts = parse_profile({"facts": {"big-cp-spans-tp": {
        "when": "cp_active(*)", "then": "attn_cp_size == tp_size", "modules": ["acme.models.big*"]}}}, "test").facts
    assert facts[0].modules == ("acme.models.big*",)
    assert facts[0].describe() == "cp_active(*) implies attn_cp_size == tp_size (in acme.models.big*)"
    inv = Invariants(facts, QUANTITIES)
    cond = frozenset({CP_ACTIVE, NARROW})
    assert inv.excluding(cond, "acme.models.big_model.Layer.forward") is facts[0]
    assert inv.excluding(cond, "acme.models.small.Layer.forward") is None
    assert inv.excluding(cond) is None  # a path of no known function: only unscoped facts apply
    # `f(*)` is a call of `f`, not of a name ending in it, nor a call made on its result
    assert inv.excluding(frozenset({(f"@acme.cp.is_cp_active({ARG}$1:batch{END})", True), NARROW}),
                         "acme.models.big.f") is None
    assert inv.excluding(frozenset({(f"@acme.cp.cp_active({ARG}$1:batch{END}).ready()", True), NARROW}),
                         "acme.models.big.f") is None


MODEL = """\
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from acme.cp import cp_active


    class Layer:
        def __init__(self, ranks):
            self.tp = dist.new_group(ranks)
            self.cp = dist.new_group(ranks)

        def forward(self, n, batch):
            buf = symm_mem.empty(n, device="cuda")
            symm_mem.rendezvous(buf, self.tp)
            if cp_active(batch):
                dist.all_gather_into_tensor(buf, buf, group=self.cp)
    """
CONFIG = """\
    [tool.commgroup-lint.extend-profile.facts.big-model-cp-never-gathers-here]
    # acme/models/big.py's validation: its context parallelism runs on the TP group
    when = "cp_active(*)"
    never = true
    modules = ["acme.models.big*"]
    """


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "acme" / "models").mkdir(parents=True)
    for name, text in (("__init__", ""), ("cp", "def cp_active(batch):\n    return batch.cp\n"),
                       ("models/__init__", ""), ("models/big", textwrap.dedent(MODEL)),
                       ("models/small", textwrap.dedent(MODEL))):
        (tmp_path / "acme" / f"{name}.py").write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(CONFIG), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_same_code_in_another_model_keeps_its_finding(project: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "acme"])
    assert [line for line in result.output.splitlines() if "CGL" in line] == [
        "acme/models/small.py:14:9: CGL002 memory registered by `rendezvous` is registered with group `self.tp` but"
        " reaches `all_gather_into_tensor` on group `self.cp` at line 16, when cp_active(batch) (no fix: no getter"
        " is known for group `self.cp`)"]
    explained = CliRunner().invoke(main, ["check", "--no-cache", "--explain-facts", "acme"])
    assert explained.output.splitlines()[0].startswith(
        "acme/models/big.py:14:9: CGL002 removed by fact `big-model-cp-never-gathers-here` (never cp_active(*)"
        " (in acme.models.big*)): memory registered by `rendezvous`")
