"""A checked repository controls its `.commgroup_lint_cache/` folder (issue 26): nothing read
from it may run, and nothing written there may land outside it.

Each attack runs `check` through the CLI on a small project whose one file has one finding,
and compares the findings with a `--no-cache` run.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from commgroup_lint import cache as cache_module
from commgroup_lint import files, signing
from commgroup_lint.cache import DIRECTORY
from commgroup_lint.cli import main

SOURCE = ("from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\n"
          "def forward():\n    return get_local_dp_buffer()\n")


@pytest.fixture(autouse=True)
def _model(project: Path) -> None:
    (project / "model.py").write_text(SOURCE)


def run(*args: str) -> tuple[int, list[dict], str]:
    result = CliRunner().invoke(main, ["check", "--format", "json", *args, "."])
    return result.exit_code, json.loads(result.stdout), result.stderr


def cache_file(project: Path) -> Path:
    run()
    (path,) = (project / DIRECTORY).glob("*.pickle")
    return path


def attrgetter_payload(command: str) -> bytes:
    """The issue's payload: `attrgetter` reached as an attribute path of `commgroup_lint.cache`,
    then `os.system` through `Cache.__init__.__globals__` and `dict.get`."""
    return (b"\x80\x04"
            b"ccommgroup_lint.cache\ndataclasses.inspect.attrgetter\np0\n0"
            b"g0\n(Vsystem\ntR("
            b"g0\n(Vget\ntR(cbuiltins\ndict\ntR"
            b"(g0\n(V__init__.__globals__\ntR(ccommgroup_lint.cache\nCache\ntRVos\ntR"
            b"tR(V" + command.encode() + b"\ntR.")


class Reduce:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple:
        return os.system, (self.command,)


def reduce_payload(command: str) -> bytes:
    return pickle.dumps({"model.py": Reduce(command)}, protocol=pickle.HIGHEST_PROTOCOL)


PAYLOADS = {"attrgetter": attrgetter_payload, "reduce": reduce_payload}


@pytest.mark.parametrize("make", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_the_payloads_are_live(tmp_path: Path, make) -> None:  # noqa: ANN001
    """Plain `pickle.loads` runs them: the tests below would catch an unpickler that did."""
    marker = tmp_path / "ran"
    pickle.loads(make(f"touch {marker}"))
    assert marker.exists()


@pytest.mark.parametrize("make", PAYLOADS.values(), ids=PAYLOADS.keys())
@pytest.mark.parametrize("signed", [False, True], ids=["as-shipped", "signed-with-the-users-key"])
def test_a_payload_in_the_cache_file_does_not_run(project: Path, tmp_path: Path, make, signed: bool) -> None:  # noqa: ANN001
    """Shipped in a repository, a payload has no valid signature and is never unpickled; even
    signed with the user's own key (a second line of defence), the unpickler refuses it."""
    expected = run("--no-cache")
    path = cache_file(project)
    marker = tmp_path / "ran"
    body = cache_module._MAGIC + make(f"touch {marker}")
    key = signing.user_key(path.parent.parent) if signed else os.urandom(signing.KEY_BYTES)
    assert key is not None
    path.write_bytes(signing.signature(key, path.name.encode() + body) + body)
    rc, findings, stderr = run()
    assert not marker.exists()
    assert (rc, findings) == expected[:2]
    assert stderr == f"warning: ignoring the cache file {path} " \
                     "(damaged, or not written by this user's commgroup-lint); it is rebuilt\n"
    assert run() == expected  # rewritten: the next run is silent


def test_the_unpickler_takes_exact_names_only() -> None:
    from commgroup_lint.cache import _Unpickler

    unpickler = _Unpickler.__new__(_Unpickler)
    for module, name in [("commgroup_lint.cache", "dataclasses.inspect.attrgetter"),
                         ("commgroup_lint.cache", "Path"),  # imported there, but not its own
                         ("commgroup_lint.cache", "Cache"),  # its own, but not plain data
                         ("commgroup_lint.cache", "os"), ("builtins", "getattr"), ("posix", "system")]:
        with pytest.raises(pickle.UnpicklingError, match="is not allowed in a cache file"):
            unpickler.find_class(module, name)
    assert unpickler.find_class("commgroup_lint.cache", "FileRecord") is cache_module.FileRecord


@pytest.mark.parametrize("damage", ["truncated", "foreign", "old-format"])
def test_a_damaged_or_foreign_cache_is_ignored_with_one_line(project: Path, damage: str) -> None:
    import hashlib

    expected = run("--no-cache")
    path = cache_file(project)
    data = path.read_bytes()
    payload = pickle.dumps({"x": 1})
    path.write_bytes({
        "truncated": data[: len(data) // 2],
        "foreign": payload,
        "old-format": b"commgroup-lint cache 6\n" + hashlib.sha256(payload).digest() + payload,
    }[damage])
    rc, findings, stderr = run()
    assert (rc, findings) == expected[:2]
    assert len(stderr.splitlines()) == 1 and stderr.startswith("warning: ignoring the cache file")


@pytest.mark.parametrize("descriptors", [True, False], ids=["descriptors", "paths"])
@pytest.mark.parametrize("dangling", [False, True], ids=["existing-target", "dangling"])
def test_a_cache_file_that_is_a_link_out_is_replaced_not_followed(project: Path, tmp_path: Path, dangling: bool,
                                                                  descriptors: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Also where the folder is named by its path (no `dir_fd`: Windows)."""
    monkeypatch.setattr(files, "_DIR_FDS", descriptors and files._DIR_FDS)
    expected = run("--no-cache")
    path = cache_file(project)
    path.unlink()
    outside = tmp_path / "outside" / "deeper" / "victim"
    if not dangling:
        outside.parent.mkdir(parents=True)
        outside.write_text("keep me\n")
    path.symlink_to(outside)
    rc, findings, stderr = run()
    assert (rc, findings) == expected[:2]
    assert "symbolic link" in stderr
    if dangling:
        assert not (tmp_path / "outside").exists()  # no file, and no folder made on the way
    else:
        assert outside.read_text() == "keep me\n"
    assert path.is_file() and not path.is_symlink()  # the link itself was replaced
    assert run() == expected


@pytest.mark.parametrize("descriptors", [True, False], ids=["descriptors", "paths"])
def test_a_cache_folder_that_is_a_link_is_not_used(project: Path, tmp_path: Path, descriptors: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_DIR_FDS", descriptors and files._DIR_FDS)
    expected = run("--no-cache")
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / DIRECTORY).symlink_to(outside)
    assert run()[:2] == expected[:2]
    assert list(outside.iterdir()) == []
    (project / DIRECTORY).unlink()
    (project / DIRECTORY).symlink_to(tmp_path / "gone" / "deeper")
    assert run()[:2] == expected[:2]
    assert not (tmp_path / "gone").exists()


def test_other_entries_in_the_folder_are_replaced_not_followed(project: Path, tmp_path: Path) -> None:
    """The folder's `.gitignore` and `CACHEDIR.TAG` as links out (or a FIFO) are replaced."""
    run()
    outside = tmp_path / "victim"
    outside.write_text("keep me\n")
    folder = project / DIRECTORY
    for name in (".gitignore", "CACHEDIR.TAG"):
        (folder / name).unlink()
    (folder / ".gitignore").symlink_to(outside)
    os.mkfifo(folder / "CACHEDIR.TAG")
    for path in folder.glob("*.pickle"):
        path.unlink()
    run()
    assert outside.read_text() == "keep me\n"
    assert (folder / ".gitignore").read_text() == "# created by commgroup-lint\n*\n"
    assert stat.S_ISREG(os.lstat(folder / "CACHEDIR.TAG").st_mode)


def test_the_key_is_the_users_alone(project: Path) -> None:
    run()
    key = signing.key_path()
    st = os.lstat(key)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == signing.KEY_BYTES
    assert not str(key).startswith(str(project))


def test_a_key_others_can_read_means_no_cache(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    key = signing.key_path()
    key.parent.mkdir(parents=True)
    key.write_bytes(os.urandom(signing.KEY_BYTES))
    key.chmod(0o644)
    expected = run("--no-cache")
    rc, findings, stderr = run()
    assert (rc, findings) == expected[:2]
    assert stderr == (f"warning: no cache: its signing key {key} can be read or written by others; "
                      "delete it (a new one is made)\n")
    assert not (project / DIRECTORY).exists()
    assert run()[2] == ""  # said once per process
    key.unlink()
    os.mkfifo(key)  # never waited on
    rc, findings, stderr = run()
    assert (rc, findings) == expected[:2]
    assert stderr == f"warning: no cache: its signing key {key} is not a regular file; delete it\n"
    key.unlink()
    assert run() == expected  # a new key, and a cache again
    assert list((project / DIRECTORY).glob("*.pickle"))


def test_a_key_inside_the_project_is_not_used(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI that sets HOME to the checkout would otherwise read a key the repository ships."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(project / ".cache"))
    shipped = signing.key_path()
    shipped.parent.mkdir(parents=True)
    shipped.write_bytes(b"k" * signing.KEY_BYTES)
    shipped.chmod(0o600)
    expected = run("--no-cache")
    rc, findings, stderr = run()
    assert (rc, findings) == expected[:2]
    assert stderr == (f"warning: no cache: its signing key {shipped} lies inside the checked project {project}: "
                      "set XDG_CACHE_HOME outside it\n")
    assert not (project / DIRECTORY).exists()


def test_a_project_holding_the_home_directory_may_hold_the_key(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linting from `~` (or a dotfiles repository there) keeps its cache."""
    monkeypatch.setenv("HOME", str(project / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    expected = run("--no-cache")
    assert run() == expected
    assert signing.key_path() == project / "home" / ".cache" / "commgroup-lint" / "cache-key"
    assert signing.key_path().is_file() and list((project / DIRECTORY).glob("*.pickle"))


MARKERS = {".gitignore": "# created by commgroup-lint\n*\n",
           "CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n# commgroup-lint cache\n"}


def markers(project: Path) -> dict[str, str]:
    return {name: (project / DIRECTORY / name).read_text() for name in MARKERS if (project / DIRECTORY / name).exists()}


def test_a_failed_first_save_is_repaired_by_the_next_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Disk full while writing CACHEDIR.TAG: nothing partial is left, and the next run (the
    cache file was never written, so it saves) completes the folder. The issue's leftover,
    a 0-byte `.gitignore` and no tag, is repaired the same way."""
    real = cache_module.replace_file

    def full(path: Path, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        if path.name == "CACHEDIR.TAG":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, *args, **kwargs)

    expected = run("--no-cache")
    with monkeypatch.context() as patched:
        patched.setattr(cache_module, "replace_file", full)
        assert run() == expected
    assert markers(project) == {".gitignore": MARKERS[".gitignore"]}
    assert sorted(p.name for p in (project / DIRECTORY).iterdir()) == [".gitignore"]
    assert run() == expected
    assert markers(project) == MARKERS
    for path in (project / DIRECTORY).iterdir():
        path.unlink()
    (project / DIRECTORY / ".gitignore").write_bytes(b"")
    assert run() == expected
    assert markers(project) == MARKERS


def test_a_stale_temporary_file_in_the_folder_is_removed(project: Path) -> None:
    import subprocess
    import sys

    from commgroup_lint.files import TEMPORARY_MARK

    path = cache_file(project)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    stale = path.with_name(f".{path.name}{TEMPORARY_MARK}{dead}-abcdefgh.tmp")
    stale.write_bytes(b"partial")
    path.unlink()  # the next run saves
    run()
    assert not stale.exists() and path.exists()
