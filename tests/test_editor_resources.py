"""What the language server's checks cost (issue 35, items 6 and 7): memory stays flat over
many edited checks (a long-lived process must not freeze each check's garbage into the
permanent generation; objects are counted, not time), and a buffer over the size limit is
refused before it is parsed."""

from __future__ import annotations

import gc
from pathlib import Path

from test_bad_input import GOOD

from commgroup_lint.editor import check_buffer
from commgroup_lint.model import Position
from commgroup_lint.source import SOURCE_LIMIT


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


def test_a_buffer_over_the_size_limit_is_not_parsed(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import commgroup_lint.parsing as parsing

    def never(*args: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(parsing, "parse_python", never)
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    text = GOOD + "x = 1  # padding line\n" * (SOURCE_LIMIT // 22 + 1)
    [finding] = check_buffer(str(tmp_path / "model.py"), text).result.findings
    assert (finding.code, finding.start, finding.message) == (
        "CGL000", Position(1, 1), "too large to check (over the 4 MiB limit for one file); exclude it or split it")
