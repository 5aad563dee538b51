"""Star imports as name resolution: `from M import *` binds M's `__all__` (a literal list or
tuple) or its top-level names not starting with `_`, through chains of star imports, in both
front ends; the answer is recorded, so that a cached check is dropped when M changes. The
program is `fixtures/packages/star_imports` (DeepSpeed's `deepspeed.comm` layout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lintkit import EVERY_RULE, FIXTURES, PROFILE

from commgroup_lint.analysis.names import ImportTable
from commgroup_lint.analysis.stars import StarExports
from commgroup_lint.cache import Cache, cache_key
from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.model import Confidence, RuleSelection
from commgroup_lint.parsing import lower

ROOT = FIXTURES / "packages" / "star_imports"
FOUND = [(
    "minispeed/comm/backends.py", 19, 16, "CGL007",
    "`inference_all_reduce_` runs on the fixed group world, not on `group`, which `inference_all_reduce` was given"
    " (`all_reduce` at line 18 runs on it), when self.shm_comm_op is not None and world_size > 1; run it on `group`",
)]


def _run(root: Path, frontend: str = "ast", cache: Path | None = None) -> list[tuple[str, int, int, str, str]]:
    linter = Linter(PROFILE, RuleSelection(EVERY_RULE), frontend=frontend, min_confidence=Confidence.LOW)
    if cache is not None:
        linter.cache = Cache(cache, cache_key(*linter.cache_settings()))
    found = linter.lint(discover([str(root)])).findings
    return [(Path(f.path).relative_to(root).as_posix(), f.start.line, f.start.column, f.code, f.message) for f in found]


@pytest.mark.parametrize("frontend", ["ast", "cst"])
def test_a_chain_of_star_imports_brings_torch(frontend: str) -> None:
    assert _run(ROOT, frontend) == FOUND


def test_public_names_follow_all_chains_and_underscores() -> None:
    class Source:
        def __init__(self, path: Path) -> None:
            self.path, self.display, self.text = path, str(path), path.read_text(encoding="utf-8")

    exports = StarExports([Source(p) for p in ROOT.rglob("*.py")], "ast", frozenset())
    assert exports("minispeed.comm.utils") == (("get_local_rank", "minispeed.comm.utils.get_local_rank"),)
    assert exports("minispeed.comm.base") == (("get_caller_func", "minispeed.comm.base.get_caller_func"),
                                              ("torch", "torch"))
    assert exports("minispeed.comm.comm") == (("get_caller_func", "minispeed.comm.base.get_caller_func"),
                                              ("get_local_rank", "minispeed.comm.utils.get_local_rank"),
                                              ("torch", "torch"))
    assert exports("minispeed.comm") == exports("minispeed.comm.comm")
    assert exports("torch") is None  # not scanned: nothing is known of it


def test_a_cycle_of_star_imports_ends(tmp_path: Path) -> None:
    class Source:
        def __init__(self, name: str, text: str) -> None:
            self.path, self.display, self.text = tmp_path / name, name, text

    exports = StarExports([Source("a.py", "from b import *\nx = 1\n"), Source("b.py", "from a import *\ny = 2\n")],
                          "ast", frozenset())
    assert exports("a") == (("x", "a.x"), ("y", "b.y"))


def test_an_explicit_import_and_an_own_definition_win() -> None:
    body = lower("from m import *\nfrom n import f\ng = 1\n", "x.py", "ast").body
    table = ImportTable("x", False, [s for s in body if type(s).__name__ == "Import"], own=["g"],
                        star_names=lambda module: (("f", "m.f"), ("g", "m.g"), ("h", "m.h")))
    qualified = [table.qualify_all(name) for name in ("f", "g", "h", "i")]
    assert qualified == [["n.f"], ["x.g"], ["m.h"], ["x.i"]]
    assert table.local_name_for("m.h") == "h" and table.local_name_for("m.f") is None


def test_a_cached_check_is_dropped_when_the_star_imported_module_changes(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(ROOT, root)
    cache = tmp_path / "cache"
    assert _run(root, cache=cache) == FOUND
    base = root / "minispeed" / "comm" / "base.py"
    base.write_text(base.read_text(encoding="utf-8").replace("import torch\n", "_torch = None\n"), encoding="utf-8")
    assert _run(root, cache=cache) == []  # backends.py did not change; what its star import binds did
    assert _run(root) == []
