"""One build step beyond pyproject.toml: ship the runtime shim's start-up hook.

``commgroup_lint_runtime.pth`` goes to the top of site-packages, where the interpreter runs it
at start-up (as coverage and pytest-cov ship theirs). It does nothing unless
``COMMGROUP_LINT_RUNTIME`` is set; see ``runtime/_startup.py``.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "commgroup_lint_runtime.pth"


class build_py_with_pth(build_py):
    def run(self) -> None:
        super().run()
        # A wheel packs build_lib. An editable wheel (PEP 660) packs instead the directory the
        # install command targets, where setuptools writes the files that are not editable.
        target = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        self.copy_file(PTH, str(Path(target, PTH)), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib, PTH))]


setup(cmdclass={"build_py": build_py_with_pth})
