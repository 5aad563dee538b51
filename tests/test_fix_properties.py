"""Property tests of the autofix (issue 3): for generated call-site variants (allocator with or
without a group, different consumers, the site inside if/else/with/for, a comment on every line,
different import layouts, LF or CRLF), `--fix --unsafe-fixes` yields code that parses, a second
run changes nothing, and every comment of the input is still in the output.

Derandomized with a modest number of examples, so the run is the same every time and short.
"""

from __future__ import annotations

import ast
import io
import tempfile
import tokenize
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.fixer import fix_result, write
from commgroup_lint.model import RuleSelection
from commgroup_lint.profile import load_shipped

LINTER = Linter(load_shipped("sglang"), RuleSelection(("CGL",)))

# How the module imports the distributed package, and how it spells `get_tp_group()` (None: not imported).
IMPORT_LAYOUTS = {
    "none": ([], None),
    "one_line": (["from sglang.srt.distributed import get_tensor_model_parallel_world_size"], None),
    "parenthesised": ([
        "from sglang.srt.distributed import (",
        "    get_pp_group,",
        "    get_tensor_model_parallel_world_size,",
        ")",
    ], None),
    "aliased": (["from sglang.srt.distributed import get_tp_group as tp_group"], "tp_group()"),
    "module_alias": (["import sglang.srt.distributed as dist"], "dist.get_tp_group()"),
    "imported": (["from sglang.srt.distributed import get_tensor_model_parallel_world_size, get_tp_group"], "get_tp_group()"),
    "long_line": ([
        "from sglang.srt.distributed import get_pp_group, get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size",
    ], None),
}
DP_ATTENTION = [
    "from sglang.srt.layers.dp_attention import (",
    "    attn_tp_all_gather_into_tensor,",
    "    dp_gather_partial,",
    "    dp_scatter,",
    "    get_attention_dp_size,",
    "    get_attention_tp_group,",
    "    get_global_dp_buffer,",
    "    get_local_dp_buffer,",
    ")",
]
# consumer -> (allocator, the consuming statement)
CONSUMERS = {
    "gather": ("get_global_dp_buffer", "dp_gather_partial(buf, hidden_states, forward_batch)"),
    "scatter": ("get_local_dp_buffer", "dp_scatter(buf, hidden_states, forward_batch)"),
    "attn_tp_all_gather": ("get_local_dp_buffer", "attn_tp_all_gather_into_tensor(buf, hidden_states)"),
    "none": ("get_local_dp_buffer", "buf = buf * 2"),
}
POSITIONS = ("body", "if", "else", "with", "for")
CALL_FORMS = ("plain", "tuple", "multi_line")


@st.composite
def modules(draw: st.DrawFn) -> str:
    layout = draw(st.sampled_from(sorted(IMPORT_LAYOUTS)))
    import_lines, tp_spelling = IMPORT_LAYOUTS[layout]
    consumer = draw(st.sampled_from(sorted(CONSUMERS)))
    allocator, consume = CONSUMERS[consumer]
    groups = ["", "get_attention_tp_group()"] + ([tp_spelling] if tp_spelling else [])
    group = draw(st.sampled_from(groups))
    position = draw(st.sampled_from(POSITIONS))
    form = draw(st.sampled_from(CALL_FORMS))
    siblings = draw(st.booleans())  # communicator-style siblings choosing the group by a condition
    comments = draw(st.booleans())
    newline = draw(st.sampled_from(["\n", "\r\n"]))

    lines = ["import torch", *import_lines, *DP_ATTENTION, ""]
    if draw(st.booleans()):  # a module-level block holding an import
        lines += ["try:", "    import triton", "except ImportError:", "    triton = None", ""]
    if siblings:
        if tp_spelling is None or layout == "module_alias":
            lines.append("from sglang.srt.distributed import get_tensor_model_parallel_world_size as tp_world_size")
            lines.append("from sglang.srt.distributed import get_tp_group as tp_group_getter")
            size, tp = "tp_world_size()", "tp_group_getter()"
        else:
            lines.append("from sglang.srt.distributed import get_tensor_model_parallel_world_size as tp_world_size")
            size, tp = "tp_world_size()", tp_spelling
    lines += ["", "", "class Communicator:"]
    if siblings:
        for name in ("scatter_hidden_states", "scatter_residual"):
            lines += [
                f"    def {name}(self, hidden_states, forward_batch):",
                f"        if {size} == get_attention_dp_size():",
                f"            group = {tp}",
                "        else:",
                "            group = get_attention_tp_group()",
                "        buf = get_local_dp_buffer(group)",
                "        dp_scatter(buf, hidden_states, forward_batch)",
                "        return buf",
                "",
            ]
    call = f"{allocator}({group})"
    if form == "plain":
        site = [f"buf = {call}"]
    elif form == "tuple":
        site = ["buf, hidden_states = (", f"    {call},", "    hidden_states,", ")"]
    else:
        site = [f"buf = {allocator}(", *([f"    {group},"] if group else []), ")"]
    body = [*site, consume]
    if position == "if":
        body = ["if forward_batch.is_extend:", *(f"    {s}" for s in body), "else:", "    buf = hidden_states"]
    elif position == "else":
        body = ["if forward_batch is None:", "    buf = hidden_states", "else:", *(f"    {s}" for s in body)]
    elif position == "with":
        body = ["with torch.no_grad():", *(f"    {s}" for s in body)]
    elif position == "for":
        body = ["for _ in range(2):", *(f"    {s}" for s in body)]
    lines += ["    def forward(self, hidden_states, forward_batch):", *(f"        {s}" for s in body), "        return buf"]
    if comments:
        lines = [f"{line}  # c{i}" if line.strip() else f"# c{i}" for i, line in enumerate(lines)]
    return newline.join(lines) + newline


def comments_of(text: str) -> Counter[str]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return Counter(t.string for t in tokens if t.type == tokenize.COMMENT)


def fix_once(path: Path) -> int:
    result = LINTER.lint(discover([str(path)]))
    assert result.internal_errors == []
    report = fix_result(LINTER, result, result.fixable, unsafe=True)
    assert report.failures == []
    write(report)
    assert report.failures == []
    return report.fixed


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_fix_parses_is_idempotent_and_keeps_comments(source: str) -> None:
    ast.parse(source)  # the generator makes valid code
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "module.py"
        path.write_bytes(source.encode("utf-8"))
        fix_once(path)
        once = path.read_bytes()
        fixed = once.decode("utf-8")
        ast.parse(fixed)
        assert fix_once(path) == 0, fixed
        assert path.read_bytes() == once
    assert not comments_of(source) - comments_of(fixed)
    newline = "\r\n" if "\r\n" in source else "\n"
    assert fixed.count(newline) == fixed.count("\n"), "mixed line endings"
