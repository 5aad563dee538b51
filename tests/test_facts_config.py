"""Configuration facts (`[facts]` in a profile or the user's `extend-profile`): paths that
contradict one are pruned, with their findings; `--explain-facts` says which fact removed what."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.analysis.conditions import relation_key
from commgroup_lint.analysis.invariants import Invariants
from commgroup_lint.cli import main
from commgroup_lint.config_facts import Fact
from commgroup_lint.profile import ProfileError, parse_profile

QUANTITIES = frozenset({"tp_size", "attn_dp_size", "attn_tp_size", "attn_cp_size"})
WORLD = ("@sglang.srt.layers.dp_attention.world_dp_gather_enabled()", True)
SYMM = ("@sglang.srt.layers.dp_attention.is_allocation_symmetric()", True)
MODE = ("$2:forward_batch.dp_padding_mode.is_max_len()", True)

SOURCE = textwrap.dedent("""\
    from sglang.srt.distributed import get_tp_group
    from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_local_dp_buffer
    from sglang.srt.layers.dp_attention import get_attention_dp_size
    from acme.flags import elastic_enabled

    def forward(x):
        out = get_local_dp_buffer(get_tp_group())
        if elastic_enabled() and get_attention_dp_size() > 1:
            attn_tp_all_gather_into_tensor(out, x)
    """)


def facts(**tables: dict) -> tuple[Fact, ...]:
    return parse_profile({"facts": tables}, "test").facts


def test_an_implication_prunes_the_paths_that_contradict_it() -> None:
    inv = Invariants(facts(a={"when": "world_dp_gather_enabled()", "then": "not is_allocation_symmetric()"}),
                     QUANTITIES)
    assert inv.excluding(frozenset({WORLD, SYMM})).name == "a"  # type: ignore[union-attr]
    assert inv.excluding(frozenset({WORLD})) is None
    assert inv.excluding(frozenset({("@sglang.srt.layers.dp_attention.world_dp_gather_enabled()", False), SYMM})) is None


def test_implications_chain_and_sizes_are_read_by_their_bounds() -> None:
    inv = Invariants(facts(
        cp={"when": ["is_cp_extend()", "attn_dp_size > 1"], "then": "not *.dp_padding_mode.is_max_len()"},
        k={"when": [], "then": "is_cp_extend()"},  # a constant
    ), QUANTITIES)
    dp = relation_key("#attn_dp_size", "!=", "1")
    assert inv.excluding(frozenset({MODE, dp})).name == "cp"  # type: ignore[union-attr]
    assert inv.excluding(frozenset({MODE, (relation_key("#attn_dp_size", "==", "1")[0], True)})) is None


def test_an_exclusion_and_an_unbound_fact() -> None:
    inv = Invariants(facts(n={"when": ["self.use_a", "not self.use_b"], "never": True},
                           u={"when": "world_dp_gather_enabled()", "unbound": True}), QUANTITIES)
    assert inv.excluding(frozenset({("self.use_a", True), ("self.use_b", False)})).name == "n"  # type: ignore[union-attr]
    assert inv.excluding(frozenset({("self.use_a", True)})) is None
    assert inv.excluding(frozenset({WORLD})).name == "u"  # type: ignore[union-attr]


@pytest.mark.parametrize(("table", "problem"), [
    ({"then": "x", "never": True}, "key 'facts.f': needs exactly one of `then`, `never`, `unbound`, `same_group` or `single_rank`"),
    ({"when": [], "never": True}, "key 'facts.f.when': is required with `never` (the atoms under which it holds)"),
    ({"same_group": ["attn_cp"], "when": "attn_cp_size == tp_size"}, "key 'facts.f.same_group': must be a list of two canonical groups"),
    ({"then": "a==b"}, "key 'facts.f.then': 'a==b' has an operator without spaces around it; write `a == b`"),
    ({"then": "x", "cite": "y"}, "key 'facts.f.cite': unknown key (expected one of: evidence, modules, never, "
                                 "same_group, single_rank, source, then, unbound, when)"),
])
def test_a_malformed_fact_names_its_key(table: dict, problem: str) -> None:
    with pytest.raises(ProfileError) as err:
        parse_profile({"facts": {"f": table}}, "test")
    assert str(err.value) == f"test: {problem}"


def test_a_group_identity_fact_makes_two_groups_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = SOURCE.replace("attn_tp_all_gather_into_tensor", "attn_cp_all_gather_into_tensor")
    assert "CGL002" in run(tmp_path, monkeypatch, code, "").output
    fact = '[tool.commgroup-lint.extend-profile.facts.cp-is-tp]\nwhen = "attn_cp_size == tp_size"\nsame_group = ["attn_cp", "tp"]\n'
    out = run(tmp_path, monkeypatch, code, fact).output
    assert "when attn_cp_size != tp_size and attn_dp_size > 1 and elastic_enabled()" in out


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, config: str, *args: str):  # noqa: ANN201
    (tmp_path / "a.py").write_text(code, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "a.py", *args])
    assert "Traceback" not in result.output
    return result


FACT = ('[tool.commgroup-lint.extend-profile.facts.elastic-unbound]\nwhen = "elastic_enabled()"\n'
        'unbound = true\nsource = "srt/server_args.py:ServerArgs.check"\n')


def test_explain_facts_lists_what_each_fact_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(tmp_path, monkeypatch, SOURCE, FACT).exit_code == 0
    explained = run(tmp_path, monkeypatch, SOURCE, FACT, "--explain-facts")
    assert explained.exit_code == 1
    assert explained.output.splitlines()[0] == (
        "a.py:7:11: CGL002 removed by fact `elastic-unbound` (no memory is bound to a group when "
        "elastic_enabled(); srt/server_args.py:ServerArgs.check): memory from `get_local_dp_buffer` is "
        "bound to group tp but reaches `attn_tp_all_gather_into_tensor` on group attn_tp at line 9, when "
        "attn_dp_size > 1 and attn_tp_size != tp_size and elastic_enabled()")


def test_no_shipped_facts_keeps_the_users_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(tmp_path, monkeypatch, SOURCE, FACT, "--no-shipped-facts").exit_code == 0


def test_explain_facts_with_fix_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(tmp_path, monkeypatch, SOURCE, FACT, "--explain-facts", "--fix")
    assert result.exit_code == 2
    assert "--explain-facts lists what the facts remove" in result.output


def test_a_fact_whose_cited_code_changed_is_stale(tmp_path: Path) -> None:
    from commgroup_lint.fact_citations import citation_problem

    (tmp_path / "srt").mkdir()
    (tmp_path / "srt" / "args.py").write_text(
        "class Args:\n    def check(self):\n        assert self.backend == 'mooncake', 'needs mooncake'\n", encoding="utf-8")
    fact = Fact("f", "unbound", ("flag()",), source="srt/args.py:Args.check", evidence="needs mooncake")
    assert citation_problem(fact, tmp_path) is None
    assert citation_problem(Fact("f", "unbound", ("flag()",), source="srt/args.py:Args.validate"), tmp_path) == \
        "srt/args.py defines no `Args.validate` any more"
    moved = Fact("f", "unbound", ("flag()",), source="srt/args.py:Args.check", evidence="requires mooncake")
    assert citation_problem(moved, tmp_path) == "`Args.check` no longer contains 'requires mooncake'"


def test_the_shipped_facts_cite_their_sources() -> None:
    from commgroup_lint.profile import load_shipped

    for fact in load_shipped("sglang").facts:
        assert fact.shipped and fact.source.partition(":")[2] and fact.evidence, fact.name


def test_no_shipped_facts_leaves_out_the_profiles_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = SOURCE.replace("from acme.flags import elastic_enabled",
                          "from sglang.srt.layers.dp_attention import world_dp_gather_enabled")
    code = code.replace("elastic_enabled()", "world_dp_gather_enabled()")
    assert run(tmp_path, monkeypatch, code, "").exit_code == 0
    kept = run(tmp_path, monkeypatch, code, "", "--no-shipped-facts")
    assert kept.exit_code == 1
    assert kept.output.startswith("a.py:7:11: CGL002 memory from `get_local_dp_buffer` is bound to group tp")


@pytest.mark.parametrize(("enforced", "exit_code"), [(True, 0), (False, 1)])
def test_a_fact_is_not_applied_where_its_cited_code_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            enforced: bool, exit_code: int) -> None:
    (tmp_path / "acme").mkdir()
    message = "elastic needs mooncake" if enforced else "elastic needs any backend"
    (tmp_path / "acme" / "args.py").write_text(f"def check(a):\n    assert a.ok, {message!r}\n", encoding="utf-8")
    cited = FACT.replace('source = "srt/server_args.py:ServerArgs.check"\n',
                         'source = "acme/args.py:check"\nevidence = "elastic needs mooncake"\n')
    assert run(tmp_path, monkeypatch, SOURCE, cited).exit_code == exit_code


def test_a_fact_removes_a_missing_group_on_a_path_it_excludes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = textwrap.dedent("""\
        from sglang.srt.layers.dp_attention import get_local_dp_buffer
        from acme.flags import elastic_enabled

        def f():
            if elastic_enabled():
                return get_local_dp_buffer()
        """)
    fact = '[tool.commgroup-lint.extend-profile.facts.no-elastic]\nwhen = []\nthen = "not elastic_enabled()"\n'
    assert run(tmp_path, monkeypatch, code, "").output.startswith("a.py:6:16: CGL001")
    assert run(tmp_path, monkeypatch, code, fact).exit_code == 0
    explained = run(tmp_path, monkeypatch, code, fact, "--explain-facts").output
    assert explained.startswith("a.py:6:16: CGL001 removed by fact `no-elastic` (always not elastic_enabled()): "
                                "`get_local_dp_buffer` is called without its group argument `group`")


def test_a_fact_may_cite_where_each_release_keeps_its_code(tmp_path: Path) -> None:
    from commgroup_lint.fact_citations import citation_problem, stale

    (tmp_path / "srt").mkdir()
    (tmp_path / "srt" / "widths.py").write_text("def derive_widths(tp, dp, cp):\n    return tp // dp // cp\n",
                                                encoding="utf-8")
    table = {"when": ["attn_dp_size == 1", "attn_tp_size == 1"], "then": "attn_cp_size == tp_size",
             "source": ["srt/widths.py:derive_attn_tp_size", "srt/widths.py:derive_widths"], "evidence": "tp // dp // cp"}
    fact = facts(widths=table)[0]
    assert (fact.source, fact.also) == ("srt/widths.py:derive_attn_tp_size", ("srt/widths.py:derive_widths",))
    assert citation_problem(fact, tmp_path) is None
    assert not stale(fact, [tmp_path / "srt" / "widths.py"])
    moved = facts(widths={**table, "source": "srt/widths.py:derive_attn_tp_size"})[0]
    assert stale(moved, [tmp_path / "srt" / "widths.py"])
