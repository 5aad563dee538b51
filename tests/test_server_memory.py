"""The language server's memory stays flat over many edited checks (issue 35, item 6): a
long-lived process must not freeze each check's garbage into the permanent generation.
Objects are counted (what the collector tracks), not time."""

from __future__ import annotations

import gc
from pathlib import Path

from commgroup_lint.editor import check_buffer
from test_bad_input import GOOD


def tracked_after_collection() -> int:
    gc.collect()
    return len(gc.get_objects()) + gc.get_freeze_count()


def test_objects_stay_flat_over_100_edited_checks(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    (tmp_path / "helpers.py").write_text(GOOD)
    path = str(tmp_path / "model.py")
    gc.unfreeze()  # what an earlier test froze is not this test's to count
    for i in range(10):  # warm: imports, caches of interned names
        check_buffer(path, GOOD + f"\nEDIT = {i}\n")
    before = tracked_after_collection()
    for i in range(100):
        checked = check_buffer(path, GOOD + f"\nEDIT = {i}\n")
        assert [f.code for f in checked.result.findings] == ["CGL001"]
    del checked
    after = tracked_after_collection()
    assert gc.get_freeze_count() == 0
    assert after - before < 2_000, f"{after - before} more objects after 100 checks"
