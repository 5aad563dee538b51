"""The source text of an `ast` node, as `ast.get_source_segment` gives it, from lines split once.

`ast.get_source_segment` splits the whole source into lines on every call; called once per
fact over an engine's argument validation (thousands of lines), that was a third of a warm run.
"""

from __future__ import annotations

import ast
import io


class Segments:
    """One source's lines (split where the tokenizer ends a line: `\\n`, `\\r\\n`, `\\r`)."""

    def __init__(self, text: str) -> None:
        self.lines = io.StringIO(text, newline="").readlines()

    def of(self, node: ast.AST) -> str | None:
        """The node's text (its offsets count UTF-8 bytes), or None without a position."""
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if start is None or end is None or col is None or end_col is None or end > len(self.lines):
            return None
        first = self.lines[start - 1].encode()
        if start == end:
            return first[col:end_col].decode()
        last = self.lines[end - 1].encode()[:end_col].decode()
        return "".join([first[col:].decode(), *self.lines[start:end - 1], last])
