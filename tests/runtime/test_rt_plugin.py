"""The pytest plugin: per-test verdicts, marker, fixture, options; importing without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

try:  # imported before pytester snapshots sys.modules: a torch imported in a test is kept
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - the linter installed without the runtime extra
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

GROUPS = textwrap.dedent(
    """
    import pytest
    import torch
    import torch.distributed as dist

    @pytest.fixture(scope="session")
    def groups(tmp_path_factory):
        store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        yield dist.new_group([0], group_desc="alpha"), dist.new_group([0], group_desc="beta")
        dist.destroy_process_group()
    """
)

TESTS = textwrap.dedent(
    """\
    import torch
    import torch.distributed as dist
    from commgroup_lint import runtime

    def test_mismatch(groups):
        alpha, beta = groups
        with runtime.simulated_symmetric_memory(alpha):
            buf = torch.ones(4)  # allocation
        try:
            dist.all_reduce(buf, group=beta)
        except runtime.GroupMismatchError:
            pass  # swallowed: the test must fail anyway in assert mode

    def test_clean(groups):
        alpha, _ = groups
        with runtime.simulated_symmetric_memory(alpha):
            buf = torch.ones(4)
        dist.all_reduce(buf, group=alpha)
    """
)
ALLOCATION_LINE = TESTS.splitlines().index("        buf = torch.ones(4)  # allocation") + 1


def _plugin_args() -> list[str]:
    from importlib.metadata import entry_points

    if any(ep.value == "commgroup_lint.runtime.pytest_plugin" for ep in entry_points(group="pytest11")):
        return ["-p", "no:cacheprovider"]  # auto-loaded through the installed entry point
    return ["-p", "commgroup_lint.runtime.pytest_plugin", "-p", "no:cacheprovider"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for key in ("COMMGROUP_LINT_RUNTIME", "COMMGROUP_LINT_RUNTIME_LOG", "COMMGROUP_LINT_RUNTIME_PROFILE", "RANK"):
        monkeypatch.delenv(key, raising=False)
    pytester.makeconftest(GROUPS)
    pytester.makepyfile(test_user=TESTS)
    return pytester


@needs_torch
def test_assert_mode_fails_the_test_during_which_it_happened(project: pytest.Pytester) -> None:
    junit = project.path / "junit.xml"
    result = project.runpytest_subprocess(*_plugin_args(), "--commgroup-runtime=assert", f"--junitxml={junit}")
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_mismatch _*",
        f"*test_user.py:{ALLOCATION_LINE}: CGL002 buffer bound to group 'alpha' (allocated at test_user.py:{ALLOCATION_LINE}) "
        "is used by all_reduce on group 'beta' at test_user.py:*",
        "*commgroup-lint runtime*",
        "*1 violation(s)*",
        "FAILED test_user.py::test_mismatch*",
    ])
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert cases["test_clean"].find("failure") is None
    assert "CGL002 buffer bound to group 'alpha'" in cases["test_mismatch"].find("failure").get("message")


@needs_torch
@pytest.mark.parametrize("mode", ["report", "warn"])
def test_report_and_warn_modes_pass_and_summarise(project: pytest.Pytester, mode: str) -> None:
    result = project.runpytest_subprocess(*_plugin_args(), f"--commgroup-runtime={mode}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*commgroup-lint runtime*", "*1 violation(s)*", "*CGL002 buffer bound to group 'alpha'*"])
    if mode == "warn":  # the warning is at the user's allocation line, not in the shim
        result.stdout.fnmatch_lines([f"*/test_user.py:{ALLOCATION_LINE}: CommGroupRuntimeWarning: CGL002 *"])


@needs_torch
def test_ini_option_and_a_bad_ini_value(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ncommgroup_runtime = assert\n")
    result = project.runpytest_subprocess(*_plugin_args())
    result.assert_outcomes(passed=1, failed=1)
    project.makeini("[pytest]\ncommgroup_runtime = loud\n")
    result = project.runpytest_subprocess(*_plugin_args())
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option commgroup_runtime: commgroup-lint runtime mode must be one of assert, warn, report, got 'loud'*"])


def test_a_bad_command_line_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*_plugin_args(), "--commgroup-runtime=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--commgroup-runtime: invalid choice: 'loud'*"])


@needs_torch
def test_a_bad_environment_value_warns_and_leaves_the_shim_off(project: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMMGROUP_LINT_RUNTIME", "1")
    result = project.runpytest_subprocess(*_plugin_args())
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*PytestConfigWarning: COMMGROUP_LINT_RUNTIME: *got '1'; the runtime shim stays off*"])
    assert "= commgroup-lint runtime =" not in result.stdout.str()


@needs_torch
def test_marker_and_fixture(project: pytest.Pytester) -> None:
    project.makepyfile(test_marked=textwrap.dedent(
        """
        import pytest
        import torch
        import torch.distributed as dist
        from commgroup_lint import runtime

        @pytest.mark.commgroup_runtime("assert")
        def test_marked(groups):
            alpha, beta = groups
            with runtime.simulated_symmetric_memory(alpha):
                buf = torch.ones(4)
            try:
                dist.all_reduce(buf, group=beta)
            except runtime.GroupMismatchError:
                pass

        def test_fixture(groups, commgroup_violations):
            alpha, beta = groups
            with runtime.simulated_symmetric_memory(alpha):
                buf = torch.ones(8)
            assert len(commgroup_violations) == 0
            dist.all_reduce(buf, group=beta)
            assert [(v.code, v.buffer_group, v.collective_group) for v in commgroup_violations] == [("CGL002", "alpha", "beta")]

        def test_unmarked_is_not_checked(groups):
            alpha, beta = groups
            with runtime.simulated_symmetric_memory(alpha):
                buf = torch.ones(16)
            dist.all_reduce(buf, group=beta)
        """
    ))
    result = project.runpytest_subprocess(*_plugin_args(), "test_marked.py")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_marked.py::test_marked*"])


@needs_torch
def test_a_child_process_violation_fails_the_test_that_started_it(project: pytest.Pytester) -> None:
    project.makepyfile(child=textwrap.dedent(
        """
        import os, sys, tempfile
        import torch
        import torch.distributed as dist
        from commgroup_lint import runtime

        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        a, b = dist.new_group([0]), dist.new_group([0])
        with runtime.simulated_symmetric_memory(a):
            buf = torch.ones(4)
        try:
            dist.all_reduce(buf, group=b)
        except runtime.GroupMismatchError:
            sys.exit(0)  # the parent must not rely on the exit status
        """
    ))
    project.makepyfile(test_spawns=textwrap.dedent(
        """
        import subprocess, sys

        def test_starts_a_child():
            subprocess.run([sys.executable, "child.py"], check=True)

        def test_after():
            pass
        """
    ))
    result = project.runpytest_subprocess(*_plugin_args(), "--commgroup-runtime=assert", "test_spawns.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*child.py:*: CGL002 buffer bound to group*", "FAILED test_spawns.py::test_starts_a_child*"])


@needs_torch
@pytest.mark.parametrize("rank", ["0", "1"])
def test_under_torchrun_only_rank_zero_prints_the_summary(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                           rank: str) -> None:
    monkeypatch.setenv("RANK", rank)
    result = project.runpytest_subprocess(*_plugin_args(), "--commgroup-runtime=report")
    assert ("commgroup-lint runtime" in result.stdout.str()) == (rank == "0")


def test_plugin_is_inert_without_the_option(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMMGROUP_LINT_RUNTIME", raising=False)
    pytester.makepyfile(test_plain="def test_ok():\n    import sys\n    assert 'torch' not in sys.modules\n")
    result = pytester.runpytest_subprocess(*_plugin_args())
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


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMGROUP_LINT_RUNTIME")}
    env.update(extra)
    return env


def test_import_without_torch(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_TORCH], capture_output=True, text=True, env=_env(),
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "lazy: torch is blocked" in out.stdout and "ok None" in out.stdout


def test_import_without_torch_and_the_variable_set_does_not_break(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_TORCH], capture_output=True, text=True,
                         env=_env(COMMGROUP_LINT_RUNTIME="assert"), timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "ok None" in out.stdout
    assert out.stderr.splitlines() == [
        "commgroup-lint runtime: the shim could not be installed (ImportError: torch is blocked); it stays off"
    ]
