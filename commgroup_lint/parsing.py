"""Parsing a source file into the IR, with every failure turned into a readable reason.

CPython's parser is the fast path: it gives the precise syntax error, and its tree is
lowered to the IR the analysis runs on. libcst parses only the files a fix edits, after a
nesting check (its native parser can overflow the stack on deeply nested code).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.lower_cst import lower_cst

MAX_NESTING = 300  # expression/statement depth beyond which a file is reported, not analysed


class ParseFailure(Exception):
    def __init__(self, reason: str, line: int = 1, column: int = 1) -> None:
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


@dataclass(frozen=True)
class ParsedFile:
    module: ir.Module
    cst_module: cst.Module


def parse_python(text: str, display: str) -> ast.Module:
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as err:
        raise ParseFailure(f"syntax error: {err.msg}", err.lineno or 1, (err.offset or 0) or 1) from None
    except (RecursionError, MemoryError):
        raise ParseFailure("nested too deeply for the Python parser") from None
    except ValueError as err:
        raise ParseFailure(f"cannot be parsed: {err}") from None


def nesting_depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_cst(text: str, display: str) -> ParsedFile:
    """The libcst tree and its IR (for fixes, which edit the CST)."""
    depth = nesting_depth(parse_python(text, display))
    if depth > MAX_NESTING:
        raise ParseFailure(f"nested {depth} levels deep (more than {MAX_NESTING}); too deep to analyse")
    try:
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        return ParsedFile(lower_cst(wrapper.module, positions), wrapper.module)
    except cst.ParserSyntaxError as err:
        raise ParseFailure(f"libcst cannot parse this file: {err.message}", err.raw_line, err.raw_column + 1) from None
    except RecursionError:
        raise ParseFailure("nested too deeply to analyse") from None
