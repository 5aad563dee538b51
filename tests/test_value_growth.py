"""What the value model carries stays as large as the program, not exponential in its paths."""

from __future__ import annotations

from pathlib import Path

from lintkit import PROFILE

from commgroup_lint.analysis.facts import ObjectFact, PathFact
from commgroup_lint.analysis.flow.state import join
from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.model import RuleSelection
from commgroup_lint.rule import FileContext

WRITES = 14  # kept apart, the objects of `batch` would be 2**14 at the return


def _program() -> str:
    writes = "".join(f"    if flags[{i}]:\n        batch.f{i} = {i}\n" for i in range(WRITES))
    return (
        "from dataclasses import dataclass\n\n"
        "from sglang.srt.distributed import get_tp_group\n"
        "from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor, get_global_dp_buffer\n\n\n"
        "@dataclass\nclass Batch:\n    size: int = 0\n\n\n"
        f"def make(flags):\n    batch = Batch()\n{writes}    batch.group = get_tp_group()\n    return batch\n\n\n"
        "def gather(flags, x):\n    buf = get_global_dp_buffer(make(flags).group)\n"
        "    attn_tp_all_gather_into_tensor(buf, x)\n"
    )


def test_an_object_written_on_many_paths_is_one_object(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(_program())
    seen: list[FileContext] = []
    linter = Linter(PROFILE, RuleSelection(("CGL",)), observer=seen.append)
    result = linter.lint(discover([str(tmp_path / "mod.py")]))
    assert [(f.code, f.start.line) for f in result.findings] == [("CGL002", 2 * WRITES + 19)]
    make = next(fn for ctx in seen for fn in ctx.functions if fn.qualname.endswith(".make"))
    assert len(make.returns) == 1  # one `Batch`, its fields what any path wrote


def test_a_field_one_path_did_not_write_reads_as_the_class_attribute_there() -> None:
    written = ObjectFact("m.Batch", (("size", frozenset({PathFact("a")})), ("x", frozenset({PathFact("b")}))))
    plain = ObjectFact("m.Batch", (("size", frozenset({PathFact("c")})),))
    joined = join({"batch": frozenset({written})}, {"batch": frozenset({plain})})["batch"]
    assert joined == frozenset({ObjectFact("m.Batch", (("size", frozenset({PathFact("a"), PathFact("c")})),
                                                       ("x", frozenset({PathFact("b"), PathFact("m.Batch.x")}))))})
