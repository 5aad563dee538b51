"""The start-up hook: shipped by both install modes, inert and import-free when the variable is
unset, one line on stderr for a bad value, torch never imported by it; and the post-import hooks
it relies on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from commgroup_lint.runtime import _imports
from rt_project import clean_env
from rt_startup import PTH, REPO, build_wheel, startup_hook_installed

needs_hook = pytest.mark.skipif(not startup_hook_installed(), reason="the package is not installed with its start-up hook")


@pytest.mark.slow
@pytest.mark.parametrize("hook", ["build_wheel", "build_editable"])
def test_both_install_modes_put_the_hook_at_the_top_of_site_packages(tmp_path: Path, hook: str) -> None:
    pytest.importorskip("setuptools")
    wheel = build_wheel(tmp_path, hook)
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read(PTH) == (REPO / PTH).read_bytes()
        if hook == "build_wheel":  # plain Python: nothing to build where the shim runs
            shipped = {Path(n).suffix for n in zf.namelist() if n.startswith("commgroup_lint/runtime/")}
            assert shipped == {".py"}, shipped


def _python(code: str, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(**env))


@needs_hook
@pytest.mark.parametrize("value", [None, "off", "0"])
def test_unset_or_off_imports_nothing(value: str | None) -> None:
    env = {} if value is None else {"COMMGROUP_LINT_RUNTIME": value}
    out = _python("import sys; print(sorted(m for m in sys.modules if m.startswith('commgroup_lint')))", **env)
    expected = "[]" if value is None else "['commgroup_lint', 'commgroup_lint.codes', 'commgroup_lint.runtime', "
    assert out.stdout.startswith(expected), out.stdout
    assert out.stderr == ""


@needs_hook
def test_a_bad_value_is_one_line_on_stderr_even_under_w_error() -> None:
    out = _python("print('ran')", "-W", "error", COMMGROUP_LINT_RUNTIME="1")
    assert out.returncode == 0 and out.stdout == "ran\n"
    assert out.stderr.splitlines() == [
        "commgroup-lint runtime: COMMGROUP_LINT_RUNTIME='1' is none of assert, warn, report "
        "(or 0, off, false, no for off): the shim stays off"
    ]


@needs_hook
def test_the_hook_never_imports_torch_itself() -> None:
    code = "import json, sys; print(json.dumps(['torch' in sys.modules, 'commgroup_lint.runtime._shim' in sys.modules]))"
    out = _python(code, COMMGROUP_LINT_RUNTIME="assert")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[false, false]" and out.stderr == ""


# -- post-import hooks -------------------------------------------------------------------------


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write modules under a fresh name space; they are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)

    yield write
    for name in written:
        sys.modules.pop(name, None)


def test_a_module_already_imported_is_called_back_at_once(modules) -> None:
    modules("cgl_done", "VALUE = 1\n")
    import cgl_done  # noqa: F401

    seen = []
    _imports.when_imported("cgl_done", lambda m, complete: seen.append((m.VALUE, complete)) or True)
    assert seen == [(1, True)]


def test_a_module_imported_later_is_called_back_before_its_importer_sees_it(modules) -> None:
    modules("cgl_later", "VALUE = 1\n")
    _imports.when_imported("cgl_later", lambda m, complete: setattr(m, "VALUE", 2) or True)
    from cgl_later import VALUE

    assert VALUE == 2
    assert _imports._WATCHER not in sys.meta_path  # nothing left to watch: the finder left


def test_a_module_being_imported_is_called_back_at_the_first_read_from_outside(modules) -> None:
    """The hook is registered from inside the module's import (as when it imports torch first):
    the callback runs when the importer reads the module, after its body defined the name."""
    modules("cgl_trigger", """
        from commgroup_lint.runtime import _imports

        def patch(module, complete):
            if not hasattr(module, "f"):
                return False
            module.f = lambda: "patched"
            return True

        _imports.when_imported("cgl_partial", patch)
        """)
    modules("cgl_partial", """
        import cgl_trigger  # registers the hook while this module is half-way imported

        def f():
            return "original"
        """)
    from cgl_partial import f

    assert f() == "patched"
    assert type(sys.modules["cgl_partial"]).__name__ == "module"  # its class was put back


def test_a_failing_callback_is_one_line_on_stderr(modules, capsys: pytest.CaptureFixture[str]) -> None:
    modules("cgl_fail", "VALUE = 1\n")
    _imports.when_imported("cgl_fail", lambda m, complete: 1 / 0)
    import cgl_fail

    assert cgl_fail.VALUE == 1
    assert capsys.readouterr().err == "commgroup-lint runtime: hook for cgl_fail failed: ZeroDivisionError: division by zero\n"


@needs_hook
def test_importing_torch_installs_the_shim_and_a_bad_configuration_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "pyproject.toml").write_text("[tool.commgroup-lint]\nselect = 3\n")
    code = "import torch; from commgroup_lint.runtime import _process; print(_process.process_mode())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env=clean_env(COMMGROUP_LINT_RUNTIME="warn"))
    assert out.returncode == 0 and out.stdout == "warn\n", out.stderr
    assert [line for line in out.stderr.splitlines() if line.startswith("commgroup-lint")] == [
        f"commgroup-lint runtime: {tmp_path / 'pyproject.toml'}: key 'tool.commgroup-lint.select': must be a list "
        "of strings (a key the runtime shim does not read: nothing dropped)"
    ]
