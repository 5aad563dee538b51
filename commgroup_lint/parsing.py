"""Parsing a source file into the IR, with every failure turned into a readable reason.

Two front ends lower into the same IR. CPython's parser (`ast`, the default) is the fast
one and gives the precise syntax error. libcst (`cst`) is the reference: slower, the same
findings (a test holds the two to it). CPython parses first either way, so libcst, whose
native parser can overflow the stack on deeply nested code, only sees shallow files.
"""

from __future__ import annotations

import ast

from commgroup_lint.analysis import ir
from commgroup_lint.analysis.lower_ast import lower_ast

MAX_NESTING = 300
"""Tree depth beyond which libcst (`--frontend cst`) is not given the file: it is reported. Each
`elif` counts here, as libcst nests it in its `if` and overflows on long chains; the ast front
end counts real nesting (see `lower_ast.MAX_NESTING`)."""


class ParseFailure(Exception):
    def __init__(self, reason: str, line: int = 1, column: int = 1) -> None:
        super().__init__(reason)
        self.reason, self.line, self.column = reason, line, column


FRONTENDS = ("ast", "cst")


def parse_python(text: str, display: str) -> ast.Module:
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as err:
        raise ParseFailure(f"syntax error: {err.msg}", err.lineno or 1, (err.offset or 0) or 1) from None
    except RecursionError:
        raise ParseFailure("nested too deeply for the Python parser") from None
    except MemoryError:  # CPython's parser says so when its stack is full, or when memory is
        raise ParseFailure("the Python parser ran out of memory (its stack, on deep nesting, or the process's)") from None
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


def lower(text: str, display: str, frontend: str = "ast") -> ir.Module:
    """The file's IR, through the chosen front end; raises `ParseFailure`."""
    tree = parse_python(text, display)
    try:
        return lower_ast(tree, text) if frontend == "ast" else _lower_with_libcst(text, tree)
    except RecursionError:
        raise ParseFailure("nested too deeply to analyse") from None


def _lower_with_libcst(text: str, tree: ast.Module) -> ir.Module:
    depth = nesting_depth(tree)
    if depth > MAX_NESTING:
        raise ParseFailure(f"nested {depth} levels deep (more than {MAX_NESTING}); too deep to analyse")
    import libcst as cst  # imported only for this front end: its import costs about 0.1 s
    from libcst.metadata import MetadataWrapper, PositionProvider

    from commgroup_lint.analysis.lower_cst import lower_cst

    try:
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
        return lower_cst(wrapper.module, wrapper.resolve(PositionProvider))
    except cst.ParserSyntaxError as err:
        raise ParseFailure(f"libcst cannot parse this file: {err.message}", err.raw_line, err.raw_column + 1) from None
