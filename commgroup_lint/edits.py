"""Text edits a fix is made of: an argument added or replaced, a statement inserted, an import
extended or added. Edits are character ranges of the original text, so everything outside
them (comments, quotes, line endings, a BOM) is kept byte for byte. Import statements are
read with libcst, which knows every spelling of an import."""

from __future__ import annotations

import io
import tokenize
from typing import TYPE_CHECKING

from commgroup_lint.analysis import ir
from commgroup_lint.model import Edit
from commgroup_lint.source import SourceFile, line_starts

if TYPE_CHECKING:  # libcst is imported when an import statement is extended (its import costs 0.1 s)
    import libcst as cst

DEFAULT_LINE_LENGTH = 88


def line_length(source: SourceFile) -> int:
    """The line length the file keeps to: 88 (black, ruff) unless its lines are longer."""
    return max([DEFAULT_LINE_LENGTH, *(len(line) for line in source.text.splitlines())])


def span_text(source: SourceFile, span: ir.Span) -> str:
    return source.text[source.offset(span.line, span.col): source.offset(span.end_line, span.end_col)]


def replace_span(source: SourceFile, span: ir.Span, text: str) -> Edit:
    return Edit(source.offset(span.line, span.col), source.offset(span.end_line, span.end_col), text)


def insert_argument(source: SourceFile, call: ir.Call, argument: str) -> Edit:
    """Add `argument` as the first argument of `call`."""
    func_end = source.offset(call.func.span.end_line, call.func.span.end_col)
    paren = source.text.index("(", func_end) + 1
    return Edit(paren, paren, f"{argument}, " if call.args else argument)


def add_argument(source: SourceFile, call: ir.Call, param: str, index: int | None, argument: str) -> Edit | None:
    """Pass `argument` where the signature takes it: as the next positional argument when that
    is its position and only positional arguments are given, else by keyword. None when the
    call cannot be told to lack it (`*args`, `**kwargs`)."""
    if call.has_star_args:
        return None
    positional = [a for a in call.args if a.keyword is None]
    if index is not None and index == len(positional) and len(positional) == len(call.args):
        return append_argument(source, call, argument)
    return append_argument(source, call, f"{param}={argument}")


def append_keyword(source: SourceFile, call: ir.Call, keyword: str, argument: str) -> Edit:
    return append_argument(source, call, f"{keyword}={argument}")


def append_argument(source: SourceFile, call: ir.Call, text: str) -> Edit:
    """Add `text` as the last argument of `call`, just inside its closing parenthesis
    (an argument's own span can stop short of its parentheses, as in `f((x))`)."""
    if not call.args:
        return insert_argument(source, call, text)
    start = source.offset(call.span.line, call.span.col)
    snippet = source.text[start: source.offset(call.span.end_line, call.span.end_col)]
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(snippet).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):  # not expected for a call CPython parsed; stay safe
        value = call.args[-1].value.span
        end = source.offset(value.end_line, value.end_col)
        return Edit(end, end, f", {text}")
    last = tokens[-2]  # what precedes the call's closing `)`: the last argument, or its trailing comma
    snippet_starts = line_starts(snippet)
    end = start + snippet_starts[last.end[0] - 1] + last.end[1]
    return Edit(end, end, f" {text}" if last.string == "," else f", {text}")


def indentation(source: SourceFile, line: int) -> str:
    text = source.text[source.line_starts[line - 1]: source.line_starts[line] if line < len(source.line_starts) else None]
    return text[: len(text) - len(text.lstrip(" \t"))]


def starts_line(source: SourceFile, span: ir.Span) -> bool:
    """Whether a statement is the first thing on its line, so a statement can be inserted before it
    (not the body of a one-line `if x: ...`, not after a `;`, not an `elif` test)."""
    start = source.offset(span.line, span.col)
    head = source.text[source.line_starts[span.line - 1]: start]
    return not head.strip() and not source.text.startswith(("elif", "else"), start)


def insert_statement_before(source: SourceFile, line: int, statement: str) -> Edit:
    """Insert `statement` (lines without indentation) before `line`, at that line's indentation."""
    indent = indentation(source, line)
    lines = statement.splitlines()
    body = "".join(f"{indent}{text}{source.newline}" if text.strip() else source.newline for text in lines)
    start = source.line_starts[line - 1]
    return Edit(start, start, body)


def statement_text(source: SourceFile, stmt: ir.Stmt) -> str:
    """A statement's whole lines, dedented to its own column."""
    start = source.line_starts[stmt.span.line - 1]
    end = source.line_starts[stmt.span.end_line] if stmt.span.end_line < len(source.line_starts) else len(source.text)
    lines = source.text[start:end].splitlines()
    return "\n".join(text[stmt.span.col:] if len(text) >= stmt.span.col and not text[: stmt.span.col].strip() else text.lstrip() for text in lines)


def add_import(source: SourceFile, module: ir.Module, package: str, name: str) -> Edit:
    """Import `name` from `package`: extend the module's top-level `from package import ...`,
    or add a new import after the last top-level import."""
    for stmt in module.body:
        if isinstance(stmt, ir.Import) and stmt.names and all(
            n.name not in (None, "*") and n.level == 0 and n.module == package for n in stmt.names
        ):
            return replace_span(source, stmt.span, extend_import(span_text(source, stmt.span), name, source))
    imports = [s for s in module.body if isinstance(s, ir.Import)]
    new_line = f"from {package} import {name}{source.newline}"
    if imports:
        after = imports[-1].span.end_line
    else:
        first = module.body[0] if module.body else None
        is_docstring = isinstance(first, ir.ExprStmt) and isinstance(first.value, ir.Const) and isinstance(first.value.value, str)
        after = first.span.end_line if is_docstring and first is not None else 0
    offset = source.line_starts[after] if after < len(source.line_starts) else len(source.text)
    prefix = "" if offset == 0 or source.text[offset - 1] in "\r\n" else source.newline
    return Edit(offset, offset, prefix + new_line)


def extend_import(statement: str, name: str, source: SourceFile) -> str:
    """`from m import a, b` plus `name`, in the formatter's layout (sorted, split when too long)."""
    import libcst as cst

    node = cst.parse_statement(statement + "\n")
    assert isinstance(node, cst.SimpleStatementLine) and isinstance(node.body[0], cst.ImportFrom)
    imp = node.body[0]
    assert not isinstance(imp.names, cst.ImportStar)
    if "#" in statement:  # comments inside the parentheses: add the name last, keep the rest as it is
        return _append_line(statement, imp, name, source.newline) or _append_alias(imp, name, source.newline)
    spellings = [_alias_text(alias) for alias in imp.names]
    keys = [s.lower() for s in spellings]
    position = next((i for i, key in enumerate(keys) if key > name.lower()), len(keys)) if keys == sorted(keys) else len(keys)
    spellings.insert(position, name)
    head = "from " + "." * len(imp.relative) + (cst.Module([]).code_for_node(imp.module) if imp.module else "") + " import "
    multi_line = imp.lpar is not None and "\n" in statement
    one_line = head + (f"({', '.join(spellings)})" if imp.lpar is not None else ", ".join(spellings))
    if not multi_line and len(one_line) <= line_length(source):
        return one_line
    nl = source.newline
    return head + "(" + nl + "".join(f"    {s},{nl}" for s in spellings) + ")"


def _alias_text(alias: cst.ImportAlias) -> str:
    import libcst as cst

    return cst.Module([]).code_for_node(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()


def _append_line(statement: str, imp: cst.ImportFrom, name: str, newline: str) -> str | None:
    """`name,` on a line of its own just before the closing parenthesis, at the names' indentation,
    when the names end with a trailing comma and `)` starts its own line; None otherwise."""
    import libcst as cst

    lines = statement.splitlines(keepends=True)
    names = list(imp.names)  # type: ignore[arg-type]
    if imp.lpar is None or len(lines) < 3 or not lines[-1].lstrip().startswith(")") or not isinstance(names[-1].comma, cst.Comma):
        return None
    indent = next((line[: len(line) - len(line.lstrip(" \t"))] for line in lines[1:-1] if line.strip()), "    ")
    return "".join(lines[:-1]) + f"{indent}{name},{newline}" + lines[-1]


def _append_alias(imp: cst.ImportFrom, name: str, newline: str) -> str:
    """`name` after the last name, on its line (the last name's comma, and the comments after it, move
    to the new name; no other comment is copied)."""
    import libcst as cst

    names = list(imp.names)  # type: ignore[arg-type]
    new = cst.ImportAlias(cst.Name(name), comma=names[-1].comma)
    names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return cst.Module([], default_newline=newline).code_for_node(imp.with_changes(names=[*names, new]))
