"""Rule documentation pages, generated from the rule modules.

One function renders a rule's page; `commgroup-lint explain CODE` prints it, and
`scripts/generate_rule_docs.py` writes it to `docs/rules/CODE.md` (a test fails when the
files drift from the rules).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from commgroup_lint.rule import Rule, all_rules


def fix_safety(rule: type[Rule]) -> str | None:
    """`safe`, `unsafe`, or `safe or unsafe`: how the fixes of the rule's INVALID examples
    apply (derived from its own tests, not declared); None when it offers none."""
    return _fix_safety(rule.code) if rule.fixable else None


@cache
def _fix_safety(code: str) -> str | None:
    rule = all_rules().by_code(code)
    assert rule is not None, code
    from commgroup_lint.discovery import Discovered
    from commgroup_lint.engine import Linter
    from commgroup_lint.model import RuleSelection
    from commgroup_lint.profile import load_shipped

    linter = Linter(load_shipped("sglang"), RuleSelection((rule.code,)))
    examples = [Discovered(Path(f"example{i}.py"), f"example{i}.py", True, e.code.encode())
                for i, e in enumerate(rule.INVALID) if e.fixed is not None]
    kinds = {f.fix.applicability.value for f in linter.lint(examples).findings if f.fix is not None}
    return " or ".join(sorted(kinds)) or None


def render_rule_doc(rule: type[Rule]) -> str:
    """The page for one rule: title, summary, facts, the module docstring, then its examples."""
    safety = fix_safety(rule)
    if safety is None:
        fix = "none"
    elif safety == "safe":
        fix = "safe (applied by `commgroup-lint check --fix`)"
    else:
        fix = f"{safety} (an unsafe fix is applied only by `commgroup-lint check --fix --unsafe-fixes`)"
    parts = [
        f"# {rule.code}: {rule.name}\n",
        f"{rule.summary}.\n",
        f"- Code: `{rule.code}`\n- Name: `{rule.name}`\n- Default severity: {rule.severity.value}\n- Fix: {fix}\n"
        + (f"- Opt-in: runs only when selected by its code (`--select {rule.code}`, or `extend-select = "
           f"[\"{rule.code}\"]`): it makes the analysis read every file that runs a collective\n" if rule.opt_in else ""),
        rule.documentation() + "\n",
    ]
    if rule.runtime_only:
        parts.append("## Tests\n\nA verdict of the runtime shim: its tests run these programs and check it.\n")
        parts.append("".join(f"- reported: `{e.code}` (line {e.line})\n" for e in rule.INVALID)
                     + "".join(f"- not reported: `{e.code}`\n" for e in rule.VALID))
        return "\n".join(parts)
    if rule.INVALID:
        parts.append("## Flagged\n\nExamples from the rule's own tests that it reports.\n")
        for example in rule.INVALID:
            parts.append(f"Reported on line {example.line} (confidence {example.confidence.value}):\n\n"
                         f"{_code_block(example.code)}")
            if example.fixed is not None:
                parts.append(f"After `--fix`:\n\n{_code_block(example.fixed)}")
    if rule.VALID:
        parts.append("## Not flagged\n\nExamples from the rule's own tests that it accepts.\n")
        parts.extend(_code_block(example.code) for example in rule.VALID)
    return "\n".join(parts)


def _code_block(code: str) -> str:
    fence = "````" if "```" in code else "```"
    return f"{fence}python\n{code.rstrip()}\n{fence}\n"


def expected_pages() -> dict[str, str]:
    """File name (`CGL001.md`) -> text, for every rule."""
    return {f"{rule.code}.md": render_rule_doc(rule) for rule in all_rules().rules}


def is_page_name(name: str) -> bool:
    return name.startswith("CGL") and name.endswith(".md")


def drift(directory: Path) -> list[str]:
    """What differs between `directory` and the generated pages, one line each (empty: none)."""
    expected = expected_pages()
    problems = []
    for name, text in expected.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: differs from the rule module")
    if directory.is_dir():
        problems += [f"{p}: stale (no such rule)" for p in sorted(directory.iterdir())
                     if is_page_name(p.name) and p.name not in expected]
    return problems


def write_pages(directory: Path) -> list[Path]:
    """Write every page and delete stale ones; returns the files written or removed."""
    directory.mkdir(parents=True, exist_ok=True)
    expected = expected_pages()
    changed = []
    for name, text in expected.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            changed.append(path)
    for path in sorted(directory.iterdir()):
        if is_page_name(path.name) and path.name not in expected:
            path.unlink()
            changed.append(path)
    return changed
