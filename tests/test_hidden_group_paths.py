"""CGL003 on a helper whose one allocation binds a different fixed group on each path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HELPER = '''\
from vllm.distributed.parallel_state import get_dp_group, get_ep_group, get_pcp_group


class Communicator:
    def _group(self, is_sequence_parallel: bool):
        if is_sequence_parallel:
            return get_ep_group()
        if self.dp_world_size > 1:
            return get_dp_group()
        return get_pcp_group()

    def allocate(self, shape, is_sequence_parallel: bool = False):
        communicator = self._group(is_sequence_parallel).device_communicator
        return communicator.get_symmetric_memory_buffer("out", shape)
'''


def test_every_path_s_group_is_named_whatever_the_hash_seed(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text(HELPER)
    messages = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run(
            [sys.executable, "-m", "commgroup_lint", "check", "--no-cache", "--min-confidence", "low",
             "--format", "json", "helper.py"],
            cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed},
        )
        findings = json.loads(out.stdout)
        assert [(f["code"], f["line"], f["column"]) for f in findings] == [("CGL003", 12, 5)]
        messages.add(findings[0]["message"])
    assert len(messages) == 1
    assert "registered with the fixed group dp or ep or pcp (line 14)" in messages.pop()
