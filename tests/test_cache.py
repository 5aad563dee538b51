"""The cache in `.commgroup_lint_cache/`: a warm run reports exactly what a cold one does,
including after a summarised helper in another file changes; a damaged cache is ignored; an
unwritable place means no cache; concurrent runs are safe."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint.analysis import summaries
from commgroup_lint.cache import DIRECTORY
from commgroup_lint.cli import main
from speedkit import FIXTURES, check, generate


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return generate(tmp_path / "src", count=120, seed=1)


def cold(tree: Path) -> tuple:
    return check([tree])


def test_warm_equals_cold_and_analyses_nothing(corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = check([corpus], cache_dir=cache)
    assert first == cold(corpus)
    assert list(cache.glob("*.pickle"))
    calls = []
    real = summaries.SummaryIndex.analyse
    monkeypatch.setattr(summaries.SummaryIndex, "analyse", lambda self, d: calls.append(d) or real(self, d))
    assert check([corpus], cache_dir=cache) == first
    assert calls == []  # everything came from the cache


STORED = (
    "from typing import NamedTuple\n"
    "\n"
    "import torch\n"
    "from sglang.srt.distributed import get_tp_group\n"
    "from sglang.srt.layers.dp_attention import attn_tp_all_reduce, get_local_dp_buffer\n"
    "\n"
    "\n"
    "class Buffers(NamedTuple):\n"
    "    out: torch.Tensor\n"
    "\n"
    "\n"
    "class Layer:\n"
    "    def __init__(self):\n"
    "        self.buffers = Buffers(out=get_local_dp_buffer(get_tp_group()))\n"
    "\n"
    "    def forward(self):\n"
    "        attn_tp_all_reduce(self.buffers.out)\n"
)


def test_a_warm_run_reads_back_what_a_class_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a class stores (here a record holding a buffer) holds calls of the IR: the cache
    keeps them without the parser's nodes, which it would refuse to read back (silently no
    cache: every run cold)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "layer.py").write_text(STORED, encoding="utf-8")
    first = check([tmp_path / "src"], cache_dir=tmp_path / "c")
    assert [(f[0], f[2].line) for f in first[0]] == [("CGL002", 14)]
    calls = []
    real = summaries.SummaryIndex.analyse
    monkeypatch.setattr(summaries.SummaryIndex, "analyse", lambda self, d: calls.append(d) or real(self, d))
    assert check([tmp_path / "src"], cache_dir=tmp_path / "c") == first
    assert calls == []


@pytest.mark.parametrize("gate", [True, False])
def test_fixtures_cold_and_warm(tmp_path: Path, gate: bool) -> None:
    expected = check([FIXTURES], gate=gate)
    for _ in range(2):
        assert check([FIXTURES], gate=gate, cache_dir=tmp_path / "c") == expected
        assert check([FIXTURES], gate=gate, cache_dir=tmp_path / "c", frontend="cst") == expected


@pytest.mark.parametrize("edit", [
    # the helper now allocates on the attention-TP group: mismatches move
    lambda t: t.replace("return get_global_dp_buffer(get_tp_group())", "return get_global_dp_buffer(get_attention_tp_group())"),
    # the helper no longer allocates at all
    lambda t: t.replace("return get_local_dp_buffer(get_attention_tp_group())", "return torch.empty(4)"),
    # a plain helper starts allocating (a new summary, a new gate word)
    lambda t: t.replace("return torch.empty(4)", "return get_local_dp_buffer(get_tp_group())"),
])
def test_a_changed_helper_in_another_file_reaches_its_callers(corpus: Path, tmp_path: Path, edit) -> None:  # noqa: ANN001
    cache = tmp_path / "cache"
    before = check([corpus], cache_dir=cache)
    helpers = corpus / "helpers.py"
    helpers.write_text(edit(helpers.read_text()))
    after = cold(corpus)
    assert after != before  # the edit matters
    assert check([corpus], cache_dir=cache) == after
    helpers.write_text(edit(helpers.read_text()))  # and again warm
    assert check([corpus], cache_dir=cache) == after


def test_one_changed_file(corpus: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    check([corpus], cache_dir=cache)
    target = corpus / "mod_007.py"
    target.write_text(target.read_text() + "\n\ndef late(x):\n    return get_local_dp_buffer()\n")
    assert check([corpus], cache_dir=cache) == cold(corpus)


def test_renamed_or_removed_files(corpus: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    check([corpus], cache_dir=cache)
    (corpus / "mod_003.py").rename(corpus / "mod_999.py")
    (corpus / "mod_004.py").unlink()
    assert check([corpus], cache_dir=cache) == cold(corpus)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "foreign_pickle"])
def test_a_damaged_cache_file_is_ignored(corpus: Path, tmp_path: Path, damage: str) -> None:
    import pickle

    cache = tmp_path / "cache"
    expected = check([corpus], cache_dir=cache)
    (path,) = cache.glob("*.pickle")
    data = path.read_bytes()
    path.write_bytes({
        "truncate": data[: len(data) // 2],
        "flip": data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:],
        "garbage": os.urandom(1000),
        "empty": b"",
        "foreign_pickle": pickle.dumps({"x": 1}),
    }[damage])
    assert check([corpus], cache_dir=cache) == expected
    assert check([corpus], cache_dir=cache) == expected  # and it was rewritten whole


def test_a_cache_file_naming_a_foreign_class_is_ignored(corpus: Path, tmp_path: Path) -> None:
    """Even signed with the user's key, a callable from outside commgroup-lint is refused."""
    import pickle

    from commgroup_lint import cache as cache_module
    from commgroup_lint import signing

    cache = tmp_path / "cache"
    expected = check([corpus], cache_dir=cache)
    (path,) = cache.glob("*.pickle")
    body = cache_module._MAGIC + pickle.dumps({"a": os.system})
    key = signing.user_key(path.parent.parent)
    assert key is not None
    path.write_bytes(signing.signature(key, path.name.encode() + body) + body)
    assert check([corpus], cache_dir=cache) == expected


def test_an_unwritable_place_means_no_cache(corpus: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert check([corpus], cache_dir=blocker / "cache") == cold(corpus)


def test_concurrent_runs(corpus: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    expected = cold(corpus)
    results: list[tuple] = []
    threads = [threading.Thread(target=lambda: results.append(check([corpus], cache_dir=cache))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 3
    assert check([corpus], cache_dir=cache) == expected
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_cli_cache_next_to_the_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.commgroup-lint]\n")
    (project / "src" / "a.py").write_text(
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\ndef f():\n    return get_local_dp_buffer()\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runs = [CliRunner().invoke(main, ["check", "--format", "json", str(project / "src")]) for _ in range(2)]
    assert runs[0].exit_code == runs[1].exit_code == 1
    assert json.loads(runs[0].stdout) == json.loads(runs[1].stdout)
    assert (project / DIRECTORY).is_dir() and not (elsewhere / DIRECTORY).exists()
    (project / "pyproject.toml").unlink()
    CliRunner().invoke(main, ["check", "--no-cache", str(project / "src")])
    assert not (elsewhere / DIRECTORY).exists()
    CliRunner().invoke(main, ["check", str(project / "src")])
    assert (elsewhere / DIRECTORY).is_dir()  # no configuration: the current directory


def test_cli_frontend_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    outputs = {CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "--frontend", f, str(FIXTURES)]).stdout
               for f in ("ast", "cst")}
    assert len(outputs) == 1


def test_a_run_after_one_file_changed_analyses_only_that_file(corpus: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """After an edit that changes no summary, the cache's analyses of every other module still
    hold: only the edited module is analysed."""
    cache = tmp_path / "cache"
    check([corpus], cache_dir=cache)
    helpers = corpus / "helpers.py"
    helpers.write_text(helpers.read_text() + "\n# an edit that changes no summary\n")
    calls: list[str] = []
    real = summaries.SummaryIndex.analyse
    monkeypatch.setattr(summaries.SummaryIndex, "analyse", lambda self, d: calls.append(d) or real(self, d))
    warm = check([corpus], cache_dir=cache)
    monkeypatch.undo()
    assert warm == cold(corpus)
    assert calls == [str(helpers)]


_X = ("from sglang.srt.layers.dp_attention import get_local_dp_buffer\n"
      "from sglang.srt.distributed import tensor_model_parallel_all_reduce\n\n\n"
      "def g(x):\n    buf = get_local_dp_buffer()\n    tensor_model_parallel_all_reduce(buf)\n    return buf\n")
_WRAP = "from w import mk\n\n\ndef wrap(x):\n    return mk(x)\n"
_USE = ("from m import wrap\nfrom sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor\n\n\n"
        "def f(x):\n    buf = wrap(x)\n    attn_tp_all_gather_into_tensor(buf, x)\n    return buf\n")
_MK_PLAIN = "def mk(x):\n    return x\n"
_MK_BINDS = ("from sglang.srt.distributed import get_tp_group\n"
             "from sglang.srt.layers.dp_attention import get_global_dp_buffer\n\n\n"
             "def mk(x):\n    return get_global_dp_buffer(get_tp_group())\n")
_A = ("from sglang.srt.layers.dp_attention import get_local_dp_buffer\nfrom b import g\n\n\n"
      "def f(buf):\n    g(buf)\n\n\ndef unused():\n    return get_local_dp_buffer()\n")
_B = ("from sglang.srt.layers.dp_attention import attn_tp_all_gather_into_tensor\n\n\n"
      "def g(buf):\n    attn_tp_all_gather_into_tensor(buf, buf)\n")
_U = ("from sglang.srt.distributed import get_tp_group\n"
      "from sglang.srt.layers.dp_attention import get_global_dp_buffer\nfrom a import f\n\n\n"
      "def h(x):\n    buf = get_global_dp_buffer(get_tp_group())\n{call}    return buf\n")


@pytest.mark.parametrize("files, edit", [
    # an unchanged file that names a helper which starts binding memory in another file
    ({"x.py": _X, "w.py": _MK_PLAIN, "m.py": _WRAP, "u.py": _USE}, ("w.py", _MK_BINDS)),
    # an edit that passes a buffer to a helper whose module the last run never wanted
    ({"a.py": _A, "b.py": _B, "u.py": _U.format(call="")}, ("u.py", _U.format(call="    f(buf)\n"))),
], ids=["new-helper-word", "new-want"])
def test_an_edit_that_changes_what_the_index_needs(files: dict[str, str], edit: tuple[str, str],
                                                   tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in files.items():
        (tree / name).write_text(text)
    cache = tmp_path / "cache"
    check([tree], cache_dir=cache)
    (tree / edit[0]).write_text(edit[1])
    after = cold(tree)
    assert any(f[1].endswith("u.py") for f in after[0])  # the edit makes a finding in u.py
    assert check([tree], cache_dir=cache) == after
    assert check([tree], cache_dir=cache) == after  # and the run after, resumed
