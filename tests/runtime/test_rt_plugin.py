"""The pytest plugin, the environment variable, and importing without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

TEST_FILE = textwrap.dedent(
    """
    import warnings
    import torch
    import torch.distributed as dist
    from commgroup_lint import runtime

    def test_mismatch(tmp_path):
        store = dist.FileStore(str(tmp_path / "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        a = dist.new_group([0], group_desc="alpha")
        b = dist.new_group([0], group_desc="beta")
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(4)
        try:
            dist.all_reduce(buf, group=b)
        except runtime.GroupMismatchError:
            pass  # swallowed: the session must fail anyway in assert mode
        dist.destroy_process_group()
    """
)


def _plugin_args():
    try:
        from importlib.metadata import entry_points

        eps = entry_points(group="pytest11")
        if any(ep.value == "commgroup_lint.runtime.pytest_plugin" for ep in eps):
            return []  # auto-loaded through the installed entry point
    except Exception:  # pragma: no cover
        pass
    return ["-p", "commgroup_lint.runtime.pytest_plugin"]


@pytest.fixture
def project(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(test_user=TEST_FILE)
    return pytester


@pytest.mark.parametrize("mode", ["report", "warn"])
def test_plugin_prints_summary_and_passes(project, mode):
    result = project.runpytest_subprocess(*_plugin_args(), f"--commgroup-runtime={mode}", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*commgroup-lint runtime*", "*1 violation(s)*", "*CGL002 buffer bound to group 'alpha'*"])
    assert result.ret == 0


def test_plugin_fails_session_in_assert_mode(project):
    result = project.runpytest_subprocess(*_plugin_args(), "--commgroup-runtime=assert", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*CGL002*", "*1 passed*"])
    assert result.ret == 1


def test_plugin_reads_the_environment_variable(project, monkeypatch):
    monkeypatch.setenv("COMMGROUP_LINT_RUNTIME", "report")
    result = project.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*CGL002*"])
    assert result.ret == 0


def test_plugin_is_inert_without_the_option(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    import sys\n    assert 'torch' not in sys.modules\n")
    result = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    assert result.ret == 0
    assert "commgroup-lint runtime" not in result.stdout.str()


BLOCK_TORCH = textwrap.dedent(
    """
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is blocked")
            return None

    sys.meta_path.insert(0, Block())
    import importlib.util
    importlib.util.find_spec = (lambda orig: lambda name, *a, **k: None if name == "torch" else orig(name, *a, **k))(
        importlib.util.find_spec)
    import commgroup_lint.runtime as rt
    import commgroup_lint.runtime.pytest_plugin as plugin
    assert "torch" not in sys.modules
    assert rt.GroupMismatchError and rt.CODES["CGL002"]
    try:
        rt.enforce
    except ImportError as exc:
        print("lazy:", exc)
    print("ok", rt.install_from_env())
    """
)


def _env(**extra):
    env = dict(os.environ)
    env.pop("COMMGROUP_LINT_RUNTIME", None)
    env.update(extra)
    return env


def test_import_without_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", BLOCK_TORCH], capture_output=True, text=True, env=_env(), timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "lazy: torch is blocked" in out.stdout and "ok None" in out.stdout


def test_import_without_torch_and_env_var_set_does_not_break(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH], capture_output=True, text=True,
        env=_env(COMMGROUP_LINT_RUNTIME="assert"), timeout=60, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "torch is not installed" in out.stderr


ENV_SCRIPT = textwrap.dedent(
    """
    import commgroup_lint.runtime as rt
    from commgroup_lint.runtime import _process
    import torch, torch.distributed as dist
    print("mode", _process.process_mode())
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    a, b = dist.new_group([0]), dist.new_group([0])
    with rt.simulated_symmetric_memory(a):
        buf = torch.ones(4)
    dist.all_reduce(buf, group=b)
    print("count", len(rt.violations()))
    """
)


def test_environment_variable_installs_for_the_process(tmp_path):
    pytest.importorskip("torch")
    log = tmp_path / "log.jsonl"
    out = subprocess.run(
        [sys.executable, "-c", ENV_SCRIPT], capture_output=True, text=True,
        env=_env(COMMGROUP_LINT_RUNTIME="report", COMMGROUP_LINT_RUNTIME_LOG=str(log)), timeout=60, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "mode report" in out.stdout and "count 1" in out.stdout
    assert "CGL002" in out.stderr  # the summary at exit
    assert '"code": "CGL002"' in log.read_text()
