"""What `--fix` may and may not write (issues 26 and 35): an edit saved while a fix is written
is never lost; a file keeps its owner, hard links and extended attributes or is left and
reported, as is a read-only file and a link to a file outside the project; a temporary file a
killed run left is removed by the next run."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from lintkit import FIXABLE, FIXED

import commgroup_lint.cli as cli
from commgroup_lint import files

EDITED = FIXABLE.replace("return gathered", "return gathered  # saved meanwhile")
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (chown)")


@pytest.fixture(autouse=True)
def _fixable(project: Path) -> None:
    (project / "a.py").write_text(FIXABLE)


@pytest.fixture(params=[True, False], ids=["descriptors", "paths"])
def descriptors(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways of naming files in a folder: relative to its descriptor (POSIX), or by path
    (where the system has no `dir_fd`: Windows)."""
    monkeypatch.setattr(files, "_DIR_FDS", request.param and files._DIR_FDS)
    return request.param


def fix(*names: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.main, ["check", "--fix", "--no-cache", "-q", *(names or ("a.py",))])
    return result.exit_code, result.stderr


def save_in_place(path: Path) -> None:
    path.write_text(EDITED)


def save_by_rename(path: Path) -> None:
    """As vim and many editors do: a new file renamed over the old one."""
    new = path.with_name("a.py.swp")
    new.write_text(EDITED)
    os.replace(new, path)


@pytest.mark.parametrize("save", [save_in_place, save_by_rename], ids=["in-place", "by-rename"])
def test_an_edit_saved_before_the_rename_is_kept(project: Path, monkeypatch: pytest.MonkeyPatch, save,  # noqa: ANN001
                                                 descriptors: bool) -> None:
    """Saved once the new content is on disk, before the last compare: not replaced."""
    real = files._write_temporary

    def then_save(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        tmp = real(*args, **kwargs)
        save(project / "a.py")
        return tmp

    monkeypatch.setattr(files, "_write_temporary", then_save)
    rc, stderr = fix()
    assert (project / "a.py").read_text() == EDITED
    assert stderr == "error: could not fix a.py: changed on disk since it was read; not written\n"
    assert sorted(p.name for p in project.iterdir()) == ["a.py", "pyproject.toml"]  # no temporary file left


def test_an_edit_saved_into_the_old_file_during_the_rename_is_put_back(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     descriptors: bool) -> None:
    """Saved in place after the compare (the editor had the file open): the old file is read
    again after the rename, and the edit replaces the fix."""
    real = os.replace

    def save_then_rename(src, dst, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if os.path.basename(dst) == "a.py":
            with open(project / "a.py", "r+") as handle:  # in place: the inode being replaced
                handle.write(EDITED)
        return real(src, dst, **kwargs)

    monkeypatch.setattr(files.os, "replace", save_then_rename)
    rc, stderr = fix()
    monkeypatch.undo()
    assert (project / "a.py").read_text() == EDITED
    assert stderr == "error: could not fix a.py: changed on disk since it was read; not written\n"


def test_an_edit_saved_as_soon_as_the_temporary_file_appears_is_never_lost(project: Path) -> None:
    """The issue's race, against the real command: a watcher saves the edit the moment a
    temporary file shows up. Whichever side wins, the edit is what the file holds."""
    raced = 0
    for trial in range(20):
        (project / "a.py").write_text(FIXABLE)
        stop = threading.Event()
        saved = threading.Event()

        def watch(stop: threading.Event, saved: threading.Event) -> None:
            while not stop.is_set():
                if any(n.startswith(".a.py.cgl") for n in os.listdir(project)):
                    (project / "a.py").write_text(EDITED)
                    saved.set()
                    return

        watcher = threading.Thread(target=watch, args=(stop, saved))
        watcher.start()
        subprocess.run([sys.executable, "-m", "commgroup_lint", "check", "--fix", "--no-cache", "-q", "a.py"],
                       cwd=project, capture_output=True, timeout=120)
        stop.set()
        watcher.join()
        if saved.is_set():
            raced += 1
            assert (project / "a.py").read_text() == EDITED, f"trial {trial}: the edit was lost"
    assert raced >= 10  # the watcher did see the temporary file


@as_root
def test_the_owner_is_kept(project: Path) -> None:
    os.chown(project / "a.py", 65534, 65534)
    assert fix() == (0, "")
    st = os.stat(project / "a.py")
    assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert (project / "a.py").read_text() == FIXED


def test_extended_attributes_are_kept(project: Path) -> None:
    path = project / "a.py"
    try:
        os.setxattr(path, "user.origin", b"generated")
    except OSError as err:
        if err.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            pytest.skip(f"no user extended attributes here ({err.strerror})")
        raise
    assert fix() == (0, "")
    assert path.read_text() == FIXED
    assert os.getxattr(path, "user.origin") == b"generated"


def test_a_file_with_hard_links_is_left_and_reported(project: Path) -> None:
    os.link(project / "a.py", project / "other_name.txt")
    rc, stderr = fix()
    assert stderr == "error: could not fix a.py: has 2 hard links, which a new file would not keep; not written\n"
    assert (project / "a.py").read_text() == (project / "other_name.txt").read_text() == FIXABLE


def test_a_read_only_file_is_left_and_reported(project: Path, descriptors: bool) -> None:
    (project / "a.py").chmod(0o444)
    rc, stderr = fix()
    assert stderr == ("error: could not fix a.py: is read-only (make it writable to have it fixed); "
                      "not written\n")
    assert (project / "a.py").read_text() == FIXABLE


def test_a_link_to_a_file_outside_the_project_is_not_fixed(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "other-checkout" / "lib.py"
    outside.parent.mkdir()
    outside.write_text(FIXABLE)
    (project / "model.py").symlink_to(outside)
    rc, stderr = fix("model.py")
    assert outside.read_text() == FIXABLE
    assert stderr == (f"error: could not fix model.py: is a symbolic link to {outside}, outside the project; "
                      "not written (fix the target where it lives)\n")
    assert (project / "model.py").is_symlink()
    rc, stderr = fix(".")  # walked: the same
    assert outside.read_text() == FIXABLE and (project / "a.py").read_text() == FIXED


def test_a_link_inside_the_project_is_fixed_through(project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "a.py").rename(project / "pkg" / "real.py")
    (project / "a.py").symlink_to(Path("pkg") / "real.py")
    assert fix() == (0, "")
    assert (project / "pkg" / "real.py").read_text() == FIXED and (project / "a.py").is_symlink()


def test_stale_temporary_files_are_removed(project: Path, descriptors: bool) -> None:
    """A temporary file of a process that no longer runs goes; one of a live process stays."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = project / f".a.py{files.TEMPORARY_MARK}{int(dead.stdout)}-abcdefgh.tmp"
    live = project / f".a.py{files.TEMPORARY_MARK}{os.getppid()}-abcdefgh.tmp"
    mine = project / ".a.py.tmp"  # not one of ours
    for path in (stale, live, mine):
        path.write_text("partial")
    assert fix() == (0, "")
    assert not stale.exists() and live.exists() and mine.exists()


def test_an_attribute_the_new_file_already_has_needs_no_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As SELinux labels a new file like its directory and may refuse even an unchanged
    relabel: an attribute already equal is kept; a different one refused is an error."""
    path = tmp_path / "f"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.setxattr(fd, "user.label", b"same")
        except OSError as err:
            pytest.skip(f"no user extended attributes here ({err.strerror})")

        def refuse(*args: object) -> None:
            raise PermissionError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(files.os, "setxattr", refuse)
        files._set_attribute(fd, "user.label", b"same")
        with pytest.raises(PermissionError):
            files._set_attribute(fd, "user.label", b"other")
    finally:
        os.close(fd)
