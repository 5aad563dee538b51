"""The cache's stat shortcut: a file whose `stat` (size, mtime, ctime, inode) is the one recorded
with its content hash is not read again, and anything that changes the content is still seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from commgroup_lint import cache as cache_module
from commgroup_lint import engine
from commgroup_lint.cache import Cache, cache_key
from speedkit import IMPORTS, check, generate, linter

HELPER = "    return get_local_dp_buffer(get_attention_tp_group())\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return generate(tmp_path / "src", count=60, seed=3)


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test trusted at once (the default waits out timestamp granularity)."""
    monkeypatch.setattr(cache_module, "RACY_NS", 0)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the engine reads, in order."""
    seen: list[Path] = []
    real = engine.read_bytes
    monkeypatch.setattr(engine, "read_bytes", lambda path: seen.append(path) or real(path))
    return seen


FINDING = IMPORTS + "\n\ndef late(x):\n    buf = get_local_dp_buffer()\n    tensor_model_parallel_all_reduce(buf)\n    return buf\n"


def pad(text: str, size: int) -> str:
    """`text` (ending in a newline) padded with a comment to `size` characters."""
    assert len(text) + 3 <= size
    return text.rstrip("\n") + "  #".ljust(size - len(text), "x") + "\n"


def rewrite_keeping_size(path: Path, text: str, mtime_ns: int) -> None:
    before = path.stat()
    path.write_text(text)
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, mtime_ns))


def test_unchanged_files_are_not_read(corpus: Path, tmp_path: Path, trusted: None, reads: list[Path]) -> None:
    cache = tmp_path / "cache"
    first = check([corpus], cache_dir=cache)
    assert len(reads) == 62  # every file, once
    reads.clear()
    assert check([corpus], cache_dir=cache) == first
    with_findings = {f[1] for f in first[0]}
    assert {str(p) for p in reads} <= with_findings  # only to show their findings' lines


@pytest.mark.parametrize("mtime", ["bumped", "restored"])
def test_a_same_size_rewrite_is_read_again(corpus: Path, tmp_path: Path, trusted: None, reads: list[Path],
                                           mtime: str) -> None:
    """Same size, different content: a later mtime, or the old one set back (only its ctime moved).
    The file names nothing at first, so nothing but its `stat` could make the run read it."""
    cache = tmp_path / "cache"
    target = corpus / "late.py"
    target.write_text("# nothing to see\n" + "#" * 800 + "\n")
    before = check([corpus], cache_dir=cache)
    reads.clear()
    assert check([corpus], cache_dir=cache) == before and target not in reads  # trusted by its stat
    rewrite_keeping_size(target, pad(FINDING, len(target.read_text())),
                         target.stat().st_mtime_ns + (1_000_000_000 if mtime == "bumped" else 0))
    after = check([corpus])
    assert after != before  # the edit matters
    reads.clear()
    assert check([corpus], cache_dir=cache) == after
    assert target in reads


def test_a_same_size_rewrite_of_a_helper_reaches_its_callers(corpus: Path, tmp_path: Path, trusted: None) -> None:
    cache = tmp_path / "cache"
    before = check([corpus], cache_dir=cache)
    helpers = corpus / "helpers.py"
    text = helpers.read_text()
    rewrite_keeping_size(helpers, text.replace(HELPER, pad("    return torch.empty(4)\n", len(HELPER))),
                         helpers.stat().st_mtime_ns)
    after = check([corpus])
    assert after != before
    assert check([corpus], cache_dir=cache) == after


def test_touching_a_file_keeps_its_findings(corpus: Path, tmp_path: Path, trusted: None, reads: list[Path]) -> None:
    cache = tmp_path / "cache"
    before = check([corpus], cache_dir=cache)
    touched = [corpus / "helpers.py", *sorted(corpus.glob("mod_00*.py"))]
    for path in touched:
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 5_000_000_000))
    reads.clear()
    assert check([corpus], cache_dir=cache) == before
    assert set(touched) <= set(reads)  # read again, hashed, found the same
    reads.clear()
    assert check([corpus], cache_dir=cache) == before
    assert not set(touched) & set(reads) - {Path(f[1]) for f in before[0]}  # and trusted again


def test_a_file_made_undecodable_is_reported(corpus: Path, tmp_path: Path, trusted: None, reads: list[Path]) -> None:
    cache = tmp_path / "cache"
    check([corpus], cache_dir=cache)
    target = corpus / "mod_005.py"
    original = target.read_bytes()
    target.write_bytes(b"x = '\xff\xfe'\n")
    expected = check([corpus])
    assert any(f[0] == "CGL000" and f[1] == str(target) and "not valid utf-8" in f[4] for f in expected[0])
    assert check([corpus], cache_dir=cache) == expected
    reads.clear()
    assert check([corpus], cache_dir=cache) == expected  # its CGL000 comes from the cache
    assert target not in reads
    target.write_bytes(original)  # and decodable again
    assert check([corpus], cache_dir=cache) == check([corpus])


def test_recent_files_are_read_again(corpus: Path, tmp_path: Path) -> None:
    """Within RACY_NS of a run, a second write could leave the stat unchanged: no stat is recorded."""
    cache = tmp_path / "cache"
    check([corpus], cache_dir=cache)
    lint = linter()
    records = Cache(cache, cache_key(*lint.cache_settings())).load()
    assert len(records) == 62 and all(r.stat is None for r in records.values())


def test_a_file_changed_behind_a_matching_stat_restarts_the_run(corpus: Path, tmp_path: Path, trusted: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A stat that lies (a write racing the run) is caught when the text is read: the run starts over."""
    cache = tmp_path / "cache"
    before = check([corpus], cache_dir=cache)
    target = Path(before[0][0][1])  # a file with a finding: its text is read to show it
    recorded = cache_module.file_stat(target)
    target.write_text("# every finding moves down a line\n" + target.read_text())
    expected = check([corpus])
    assert expected != before
    real = engine.file_stat
    monkeypatch.setattr(engine, "file_stat", lambda path: recorded if path == target else real(path))
    assert check([corpus], cache_dir=cache) == expected
