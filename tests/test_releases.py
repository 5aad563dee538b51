"""What the README says `--diff` proposes on a real SGLang release (issue 15, item 13). The releases
are not in this repository: set `COMMGROUP_LINT_RELEASES` to a directory of unpacked releases
(`sglang-0.5.12/sglang`, as `pip download sglang==0.5.12 --no-deps` and unzip give); without it
these tests are skipped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.cli import main

RELEASES = os.environ.get("COMMGROUP_LINT_RELEASES")


@pytest.fixture
def release_0_5_12(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    source = Path(RELEASES or "") / "sglang-0.5.12" / "sglang"
    if not RELEASES or not source.is_dir():
        pytest.skip("set COMMGROUP_LINT_RELEASES to a directory holding sglang-0.5.12/sglang")
    shutil.copytree(source, tmp_path / "sglang")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_diff_on_0_5_12_proposes_upstreams_three_edits_and_a_fourth(release_0_5_12: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--diff", "sglang"])
    assert result.exit_code == 1
    assert result.stderr == "Would fix 4 findings in 2 files.\n"
    added = [line for line in result.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == [
        # the fourth: an all-gather output registered with TP, gathered on attention TP
        "+                    get_attention_tp_group(),",
        # upstream's 0.5.13 edits: the communicator's selection of `group` ...
        "+            if get_tensor_model_parallel_world_size() == get_attention_dp_size():",
        "+                group = get_tp_group()",
        "+            else:",
        "+                group = get_attention_tp_group()",
        "+                get_local_dp_buffer(group),",
        # ... and the DeepSeek-V4 forward's two buffers, with the getter imported
        "+from sglang.srt.distributed import (",
        "+    get_pp_group,",
        "+    get_tensor_model_parallel_world_size,",
        "+    get_tp_group,",
        "+)",
        "+            hidden_states, local_hidden_states = get_global_dp_buffer(get_tp_group()), hidden_states",
        "+            hidden_states, global_hidden_states = get_local_dp_buffer(get_tp_group()), hidden_states",
    ]
