"""A list appended to under many independent branches (`if not ok: reasons.append(...)`, as
vLLM's backend validation does twenty times) is one list per subset of the branches taken:
kept by position only up to `MAX_LISTS` of them, then as its elements, so the analysis stays
small and still sees a group appended to it."""

from __future__ import annotations

from lintkit import PROFILE

from commgroup_lint.analysis.facts import GroupFact, TupleFact
from commgroup_lint.analysis.flow import MAX_LISTS
from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.model import RuleSelection


def _returns(tmp_path, appends: int) -> set:
    checks = "".join(f"    if not ok{i}:\n        reasons.append('reason {i}')\n" for i in range(appends))
    program = ("import torch.distributed as dist\n"
               f"def validate(group, {', '.join(f'ok{i}' for i in range(appends))}):\n    reasons = []\n"
               f"{checks}    reasons.append(dist.group.WORLD)\n    return reasons\n")
    path = tmp_path / "validate.py"
    path.write_text(program, encoding="utf-8")
    seen: dict[str, set] = {}
    linter = Linter(PROFILE, RuleSelection(("CGL",)), gate=False,
                    observer=lambda ctx: seen.update({fn.qualname: fn.returns for fn in ctx.functions}))
    linter.lint(discover([str(path)]))
    return seen["validate.validate"]


def test_few_branches_keep_every_list_by_position(tmp_path):
    returned = _returns(tmp_path, 3)
    assert len(returned) == 8 and all(isinstance(f, TupleFact) for f in returned)


def test_many_branches_keep_the_elements_and_the_group(tmp_path):
    returned = _returns(tmp_path, 20)
    assert len(returned) <= MAX_LISTS + 21
    assert GroupFact("world") in returned
