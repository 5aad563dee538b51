"""The two halves agree: the static linter, reading the smoke model's source, reports the bugs
the runtime shim catches while the model runs on 4 gloo ranks, at the same lines. Both read
the same knowledge: the shipped profile extended by the smoke model's `commgroup-lint.toml`.

The missing group is CGL001 statically (the call omits `group`) and CGL002 at runtime (the legacy
allocator falls back to the TP group, and an attention-TP collective consumes the buffer). Pool
reuse (CGL005) is runtime-only: no static finding may claim it.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")  # the static half; the GPU machine has torch only

from rt_launch import launch  # noqa: E402
from rt_seeded import MODEL, SMOKE_DIR, seeded  # noqa: E402
from smoke_model import VARIANTS  # noqa: E402

from commgroup_lint.config import configured_profile, find_config, load_config  # noqa: E402
from commgroup_lint.discovery import discover  # noqa: E402
from commgroup_lint.engine import Linter  # noqa: E402
from commgroup_lint.model import RuleSelection  # noqa: E402

pytestmark = pytest.mark.slow

STATIC_FOR_RUNTIME = {"CGL002": {"CGL001", "CGL002"}}  # runtime verdict -> static codes for the same bug


@pytest.fixture(scope="module")
def static_findings():
    config = load_config(find_config([SMOKE_DIR]))
    profile = configured_profile(config, ["sglang"])
    result = Linter(profile, RuleSelection(("CGL001", "CGL002"))).lint(discover([SMOKE_DIR]))
    return {(os.path.realpath(f.path), _decided_at(f), f.code) for f in result.findings}


def _decided_at(finding) -> int:
    """The model line where the buggy memory gets its group, as the shim reports it: where the
    finding is, or the call inside the model its memory was taken at (the finding's binding)."""
    binding = finding.binding
    if binding is not None and os.path.realpath(binding.path) == os.path.realpath(finding.path):
        return binding.line
    return finding.start.line


@pytest.fixture(scope="module")
def runtime_violations(tmp_path_factory):
    results = launch("smoke", 4, tmp_path_factory.mktemp("agree"), attn_dp=2)
    return {
        variant: {(os.path.realpath(v["path"]), v["line"], v["code"]) for v in results[0]["variants"][variant]["violations"]}
        for variant in VARIANTS
    }


def _static(findings, variant):
    """The static findings on the lines seeded with ``variant``'s bug (the linter reads every
    branch of the one model, so it reports all variants' lines in one run)."""
    lines = {line for _, line, _, _, _ in seeded(variant)}
    return {(line, code) for p, line, code in findings if p == MODEL and line in lines}


def test_static_reports_exactly_the_seeded_static_lines(static_findings):
    assert {(p, line, code) for p, line, code in static_findings} == {
        (MODEL, line, static) for _, line, static, _, _ in seeded() if static != "CGL005"
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_static_and_runtime_report_the_same_lines(static_findings, runtime_violations, variant):
    static = _static(static_findings, variant)
    runtime = {(line, code) for _, line, code in runtime_violations[variant] if code in STATIC_FOR_RUNTIME}
    assert {line for line, _ in static} == {line for line, _ in runtime}
    for line, code in runtime:
        assert {c for l, c in static if l == line} <= STATIC_FOR_RUNTIME[code]


@pytest.mark.parametrize("variant", VARIANTS)
def test_both_match_the_seeded_markers(static_findings, runtime_violations, variant):
    marks = seeded(variant)
    assert _static(static_findings, variant) == {(line, static) for _, line, static, _, _ in marks if static != "CGL005"}
    assert {(line, code) for _, line, code in runtime_violations[variant]} == {
        (line, runtime) for _, line, _, runtime, sizes in marks if 4 in sizes
    }
