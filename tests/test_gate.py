"""The gate: which files name a word, as `\\bword\\b` would decide on their text."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from lintkit import PROFILE

from commgroup_lint.discovery import discover
from commgroup_lint.engine import Linter
from commgroup_lint.mentions import Mentions
from commgroup_lint.model import RuleSelection

WORD = "use_symmetric_memory"
TEXTS = {
    "plain.py": f"with {WORD}(g):\n",
    "prefix.py": f"x = my_{WORD}\n",
    "suffix.py": f"x = {WORD}2\n",
    "accented_before.py": f"é{WORD} = 1\n",  # a letter: part of the identifier
    "accented_after.py": f"{WORD}é = 1\n",
    "wide_paren.py": f"# （{WORD}）\n",  # punctuation: a word boundary
    "cjk_after.py": f"# {WORD}中\n",  # a CJK ideograph is a word character for \b
    "emoji.py": f"# 🚀{WORD}🚀\n",
    "start.py": f"{WORD}",
    "later.py": f"a_{WORD} = 1\n{WORD}(g)\n",  # the second hit is a whole word
}


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_word_counts_where_the_regular_expression_finds_it(as_bytes: bool) -> None:
    texts = {d: t.encode() if as_bytes else t for d, t in TEXTS.items()}
    expected = {d for d, t in TEXTS.items() if re.search(rf"\b{WORD}\b", t)}
    assert Mentions(texts)(list(texts), {WORD}) == expected
    assert expected == {"plain.py", "wide_paren.py", "emoji.py", "start.py", "later.py"}


def test_a_search_split_with_a_forked_child_finds_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from commgroup_lint import forked

    texts = {f"{i}_{d}": t for i in range(3) for d, t in TEXTS.items()}
    alone = Mentions(texts)(list(texts), {WORD, "never_named"})
    monkeypatch.setattr(forked, "MIN_COST", 2)
    assert Mentions(texts)(list(texts), {WORD, "never_named"}) == alone
    assert len(alone) == 15


def test_a_child_that_fails_leaves_its_half_to_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from commgroup_lint import forked

    parent = os.getpid()

    def work(part: list[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return [n * n for n in part]

    monkeypatch.setattr(forked, "MIN_COST", 2)
    assert forked.in_halves(list(range(10)), work) == [n * n for n in range(10)]


def test_a_half_that_raises_leaves_no_child_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from commgroup_lint import forked

    parent = os.getpid()

    def work(part: list[int]) -> list[bytes]:
        if os.getpid() == parent:
            raise KeyError("the parent's half fails")
        return [b"x" * 100_000 for _ in part]  # more than a pipe holds: the child would block writing

    monkeypatch.setattr(forked, "MIN_COST", 2)
    with pytest.raises(KeyError):
        forked.in_halves(list(range(10)), work)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left, not even a zombie


def test_a_class_method_helper_counts_only_beside_its_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Buffers.allocate(group)` binds memory: a file calling it through its class is checked (and
    holds the finding); one that says `allocate` about something else (`smem.allocate`, as
    FlashInfer's kernels do by the hundred) is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tensor.py").write_text(
        "from sglang.srt.layers.dp_attention import get_local_dp_buffer\n\n\n"
        "class Buffers:\n    @classmethod\n    def allocate(cls, group):\n        return get_local_dp_buffer(group)\n")
    (package / "user.py").write_text("from pkg.tensor import Buffers\n\n\ndef forward():\n    return Buffers.allocate(None)\n")
    (package / "kernel.py").write_text("def kernel(smem):\n    return smem.allocate(None)\n")
    monkeypatch.chdir(tmp_path)
    result = Linter(PROFILE, RuleSelection(("CGL",))).lint(discover(["pkg"]))
    assert [(f.code, f.path, f.start.line) for f in result.findings] == [("CGL001", "pkg/user.py", 5)]
    assert result.files_using_api == 2  # tensor.py and user.py, not kernel.py


@pytest.mark.parametrize("seed", range(20))
def test_words_searched_in_groups_find_what_each_alone_finds(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Words sharing substrings (searched under one anchor each) in texts built from the same
    pieces: the files found are exactly those the regular expression finds."""
    from commgroup_lint import mentions

    monkeypatch.setattr(mentions, "_GROUP_FROM", 0)
    rng = random.Random(seed)
    pieces = ["Work", "space", "buf", "fer", "_mem", "ory", "get_", "é", "中", "x"]
    words = sorted({"".join(rng.choice(pieces[:7]) for _ in range(rng.randint(2, 4))) for _ in range(12)})
    texts = {f"{i}.py": "".join(rng.choice([*pieces, " ", "(", "\n"]) for _ in range(rng.randint(0, 60)))
             for i in range(40)}
    for word in words:
        expected = {d for d, t in texts.items() if re.search(rf"\b{re.escape(word)}\b", t)}
        assert Mentions(texts)(list(texts), {word}) == expected, word
    together = Mentions(texts)(list(texts), set(words))
    assert together == {d for d, t in texts.items() for w in words if re.search(rf"\b{re.escape(w)}\b", t)}
    assert mentions._grouped([(w, w.encode()) for w in words], [t.encode() for t in texts.values()])[:-1]
