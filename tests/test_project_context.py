"""A run over some files sees the whole project (issue 15, item 2): the helper that decides a
buffer's group may live in another file, and pre-commit or an editor checks one file at a
time. The project root is the configuration file's directory, else the git work tree; the
index reads the import roots (`src`, default the root and `src/`), honouring excludes, and
only the files given are reported on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import cache as cache_module
from commgroup_lint.cli import main

REPO = Path(__file__).resolve().parent.parent

# The group a buffer is bound to is decided in `buffers.py`, the collective that consumes it in
# `comm.py`: `user.py` alone shows neither.
HELPERS = {
    "pkg/__init__.py": "",
    "pkg/buffers.py": (
        "import torch\n\n"
        "from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory\n\n\n"
        "def scratch_buffer(group, rows):\n"
        "    with use_symmetric_memory(group):\n"
        "        buffer = torch.empty((rows, 4096), device='cuda')\n"
        "    return buffer\n"
    ),
    "pkg/comm.py": (
        "from sglang.srt.layers.dp_attention import get_attention_tp_group\n\n\n"
        "def all_gather_attn_tp(output, input_):\n"
        "    get_attention_tp_group().all_gather_into_tensor(output, input_)\n"
    ),
}
USER = {
    "pkg/user.py": (
        "from sglang.srt.distributed import get_tp_group\n\n"
        "from pkg.buffers import scratch_buffer\n"
        "from pkg.comm import all_gather_attn_tp\n\n\n"
        "def gather(x):\n"
        "    out = scratch_buffer(get_tp_group(), x.shape[0])\n"
        "    all_gather_attn_tp(out, x)\n"
        "    return out\n"
    ),
}
FINDING = ("src/pkg/user.py", 8, 11, "CGL002")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def found(*args: str) -> list[tuple[str, int, int, str]]:
    result = CliRunner().invoke(main, ["check", "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return [(f["path"], f["line"], f["column"], f["code"]) for f in json.loads(result.stdout)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(tmp_path / "src", {**HELPERS, **USER})
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("marker", [".git", "pyproject.toml", "commgroup-lint.toml"])
def test_one_file_finds_what_the_whole_project_finds(project: Path, marker: str) -> None:
    if marker == ".git":
        (project / ".git").mkdir()
    else:
        (project / marker).write_text("[tool.commgroup-lint]\n" if marker == "pyproject.toml" else "")
    assert found("src") == [FINDING]
    assert found("src/pkg/user.py") == [FINDING]
    assert found("--no-cache", "src/pkg/user.py") == [FINDING]
    os.chdir(project / "src" / "pkg")
    assert found("user.py") == [("user.py", 8, 11, "CGL002")]


def test_without_a_project_a_run_sees_only_its_files(project: Path) -> None:
    assert found("src/pkg/user.py") == []
    assert found("src") == [FINDING]


def test_only_the_files_given_are_reported(project: Path) -> None:
    (project / ".git").mkdir()
    write(project / "src", {"pkg/other.py": "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
                                            "x = get_local_dp_buffer()\n"})
    assert [f[0] for f in found("src")] == ["src/pkg/other.py", "src/pkg/user.py"]
    assert found("src/pkg/user.py") == [FINDING]
    result = CliRunner().invoke(main, ["check", "src/pkg/user.py"])
    assert result.stdout.splitlines()[-2] == "Found 1 finding (1 file checked)."


def test_the_context_honours_excludes(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.commgroup-lint]\nextend-exclude = ['src/pkg/comm.py']\n")
    assert found("src/pkg/user.py") == []
    (project / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    (project / ".gitignore").write_text("src/pkg/comm.py\n")
    (project / ".git").mkdir()
    assert found("src/pkg/user.py") == []  # ignored by git: not part of the project either


def test_src_names_the_import_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "python", {**HELPERS, **USER})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "commgroup-lint.toml").write_text("src = ['python']\n")
    assert found("python/pkg/user.py") == [("python/pkg/user.py", 8, 11, "CGL002")]
    (tmp_path / "commgroup-lint.toml").write_text("src = ['elsewhere']\n")
    assert found("python/pkg/user.py") == []


def test_a_changed_helper_is_seen_through_the_cache(project: Path) -> None:
    (project / ".git").mkdir()
    assert found("src/pkg/user.py") == [FINDING]
    comm = project / "src" / "pkg" / "comm.py"
    comm.write_text(HELPERS["pkg/comm.py"].replace("get_attention_tp_group", "get_tp_group")
                    .replace("sglang.srt.layers.dp_attention", "sglang.srt.distributed"), encoding="utf-8")
    os.utime(comm, ns=(1, 1))  # an old timestamp: no "racily clean" re-read to hide a stale cache
    assert found("src/pkg/user.py") == []


def test_a_one_file_run_reuses_what_a_whole_project_run_cached(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check .` names files `./src/...`, pre-commit and editors `src/...`: one record each."""
    monkeypatch.setattr(cache_module, "RACY_NS", 0)  # the files were just written: trust their stat
    (project / ".git").mkdir()
    assert found(".") == [("./" + FINDING[0], *FINDING[1:])]
    cache_file, = (project / ".commgroup_lint_cache").glob("*.pickle")
    before = cache_file.read_bytes()
    assert found("src/pkg/user.py") == [FINDING]
    assert found(".") == [("./" + FINDING[0], *FINDING[1:])]
    assert cache_file.read_bytes() == before  # nothing was analysed again, nothing re-recorded


def test_this_repositorys_fixtures_are_not_part_of_its_project() -> None:
    """A fixture package named `sglang` would stand in for the profile's API."""
    result = CliRunner().invoke(main, ["check", "--show-files", str(REPO)])
    assert result.exit_code == 0
    listed = result.stdout.splitlines()
    assert any(p.endswith("examples/dp_attention/layer_communicator.py") for p in listed)
    assert not [p for p in listed if "/tests/fixtures/" in p]
