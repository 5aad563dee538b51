"""`Segments.of` gives what `ast.get_source_segment` gives, for every node of varied sources."""

from __future__ import annotations

import ast

import pytest

from commgroup_lint.segments import Segments

SOURCES = [
    "x = 1\n",
    "def f(a,\n      b):\n    assert a > b, 'é wide ✓'\n    return {\n  'k': a}\n",
    "if x:\r\n    y = [1,\r\n 2]\r\nz = 3",
    "s = 'a'; t = \"ü\" + s  # comment\n\x0c\nclass C:\n    attr: int = 0\n",
    "call(\rarg)\r",
    "lines = '''one\ntwo'''\nw = 中文 = 1\n",
]


@pytest.mark.parametrize("source", SOURCES)
def test_every_node_has_the_text_ast_gives_it(source: str) -> None:
    segments = Segments(source)
    for node in ast.walk(ast.parse(source)):
        assert segments.of(node) == ast.get_source_segment(source, node), ast.dump(node)
