"""The gate: which files name a word, as `\\bword\\b` would decide on their text."""

from __future__ import annotations

import re

import pytest

from commgroup_lint.engine import Mentions

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
