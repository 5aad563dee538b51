"""Nesting counted as it is (issue 35, item 12): an `elif` is not a level, and what is really too
deep loses its function, not the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bad_input import GOOD_FINDING, IMPORT, check_json, good_finding, write


def elif_chain(branches: int) -> str:
    tests = "".join(f"    {'if' if i == 0 else 'elif'} x == {i}:\n        y = get_local_dp_buffer()\n"
                    for i in range(branches))
    return IMPORT + "\n\ndef chain(x):\n" + tests + "    return y\n"


@pytest.mark.parametrize("branches", [197, 1200])
def test_a_long_elif_chain_is_analysed(tmp_path: Path, branches: int) -> None:
    write(tmp_path, "chain.py", elif_chain(branches))
    rc, findings, stderr = check_json(tmp_path, ".")
    assert findings == [("chain.py", "CGL001", 6 + 2 * i, 13, GOOD_FINDING[3]) for i in range(branches)]
    assert (rc, stderr) == (1, "")


def test_a_function_too_deep_is_lost_alone(tmp_path: Path) -> None:
    source = (IMPORT + "\n\ndef before():\n    return get_local_dp_buffer()\n"
              "\n\ndef deep(g):\n    return get_local_dp_buffer(g)" + ".b" * 600 + "\n"
              "\n\nclass Model:\n    def after(self):\n        return get_local_dp_buffer()\n")
    write(tmp_path, "deep.py", source)
    rc, findings, stderr = check_json(tmp_path, ".")
    assert findings == [
        ("deep.py", "CGL001", 5, 12, GOOD_FINDING[3]),
        ("deep.py", "CGL000", 8, 1,
         "function `deep` nested too deeply to analyse (more than 200 levels); the rest of the file was checked"),
        ("deep.py", "CGL001", 14, 16, GOOD_FINDING[3]),
    ]
    assert (rc, stderr) == (1, "")


def test_the_good_file_beside_them_is_checked(tmp_path: Path) -> None:
    write(tmp_path, "good.py", IMPORT + "\n\ndef forward():\n    return get_local_dp_buffer()\n")
    write(tmp_path, "chain.py", elif_chain(300))
    rc, findings, _ = check_json(tmp_path, ".")
    assert good_finding() in findings and len(findings) == 301
