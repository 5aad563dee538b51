"""Which files name which words: the gate's search, one substring search per word over all
the files' bytes at once, each hit confirmed as a whole word."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from commgroup_lint.forked import in_halves


class Mentions:
    """Which gate words each file names as a whole word, searched for once per word.

    Each word is a substring search in each file's UTF-8 bytes (as read: no copy), far cheaper
    than a regular expression per file; a hit is confirmed as a whole word (`\\bword\\b`). Many
    words at once (each helper of a large tree is one) are found instead by splitting each file
    into its identifiers once, so that the cost follows the text, not words times files. What
    an unchanged file was found to name in the last run (`known`, from the cache) is not
    searched again. A word with `anchors` counts only in a file that names one of them too
    (`rendezvous` beside `_symmetric_memory`).

    The sets of words each file was searched for are shared between files (most files were
    searched for the same words): a question costs one pass over the files, not one per word.
    """

    def __init__(self, texts: Mapping[str, str | bytes],
                 known: dict[str, tuple[frozenset[str], frozenset[str]]] | None = None,
                 anchors: dict[str, frozenset[str]] | None = None) -> None:
        self.texts = texts  # str, or UTF-8 bytes (`SourceFile.utf8`)
        self.anchors = anchors or {}
        known = known or {}
        self._interned: dict[frozenset[str], frozenset[str]] = {}
        self.checked: dict[str, frozenset[str]] = {d: self._intern(known[d][0] if d in known else frozenset())
                                                   for d in texts}
        self.found: dict[str, set[str]] = {d: set(known[d][1]) if d in known else set() for d in texts}

    def __call__(self, displays: Iterable[str], words: Iterable[str]) -> set[str]:
        """Those of `displays` that name one of `words`. A word is searched for in every file
        not searched for it yet, at once: each word costs one pass over the text."""
        words = set(words)
        displays = list(displays)
        wanted = frozenset(words.union(*(self.anchors.get(w, ()) for w in words)))
        asked = {self.checked[d] for d in displays}  # a few shared sets
        if any(not wanted <= checked for checked in asked):
            by_checked: dict[frozenset[str], list[str]] = {}
            for d, checked in self.checked.items():
                by_checked.setdefault(checked, []).append(d)
            todo = {checked: wanted - checked for checked in by_checked if not wanted <= checked}
            # one pass for all: a word searched again in a file gives the same answer
            self._scan([d for checked in todo for d in by_checked[checked]], frozenset().union(*todo.values()))
        return {d for d in displays if self._names(self.found[d], words)}

    def _intern(self, words: frozenset[str]) -> frozenset[str]:
        return self._interned.setdefault(words, words)

    def _names(self, found: set[str], words: set[str]) -> bool:
        anchors = self.anchors
        return any(w not in anchors or not found.isdisjoint(anchors[w]) for w in found.intersection(words))

    def known(self, display: str) -> tuple[frozenset[str], frozenset[str]]:
        return self.checked[display], frozenset(self.found[display])  # the checked set shared: one copy in the cache file

    def _scan(self, displays: list[str], words: frozenset[str]) -> None:
        needles = [(word, word.encode()) for word in words]
        by_token = {needle: word for word, needle in needles if _IDENTIFIER.fullmatch(needle)}
        if len(by_token) < _TOKENIZE_FROM:
            by_token = {}
        searched = [(word, needle) for word, needle in needles if needle not in by_token]
        groups = _grouped(searched, [self._bytes(d) for d in displays[:: max(1, len(displays) // _SAMPLE)]]) \
            if len(searched) > 1 and len(displays) * len(searched) >= _GROUP_FROM else [(b"", searched)]

        def search(part: Sequence[str]) -> list[list[str]]:
            out = []
            for d in part:
                data = self._bytes(d)
                named = [word for anchor, group in groups if anchor in data
                         for word, needle in group if needle in data and _names_word(data, needle)]
                if by_token:  # a whole word is a whole ASCII identifier; a hit next to a non-ASCII letter is confirmed
                    hits = by_token.keys() & set(_IDENTIFIER.findall(data))
                    named += [by_token[n] for n in hits if data.isascii() or _names_word(data, n)]
                out.append(named)
            return out

        grown: dict[frozenset[str], frozenset[str]] = {}
        for d, named in zip(displays, in_halves(displays, search)):
            self.found[d].update(named)
            old = self.checked[d]
            if old not in grown:
                grown[old] = self._intern(old | words)
            self.checked[d] = grown[old]

    def _bytes(self, display: str) -> bytes:
        text = self.texts[display]
        return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def _grouped(needles: list[tuple[str, bytes]], sample: Sequence[bytes]) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    """The words in groups under a substring they share (`Workspace` words under `orks`), each
    substring one that few of the `sample` files contain: a file without it is searched for
    none of its group's words, one pass over the text where there would be one per word. Words
    no substring is worth it for stay alone (under `b""`, which every text contains)."""
    present = [{data[i:i + _ANCHOR] for i in range(len(data) - _ANCHOR + 1)} for data in sample]
    pending = dict(needles)
    groups: list[tuple[bytes, list[tuple[str, bytes]]]] = []
    while len(pending) > 1:
        holders: dict[bytes, list[str]] = {}
        for word, needle in pending.items():
            for gram in {needle[i:i + _ANCHOR] for i in range(len(needle) - _ANCHOR + 1)}:
                holders.setdefault(gram, []).append(word)

        # passes saved per file, expected: the group's words' where the anchor is absent, less its own
        saving = {gram: len(words) * (1 - sum(gram in grams for grams in present) / max(1, len(present))) - 1
                  for gram, words in holders.items() if len(words) > 1}
        best = max(sorted(saving), key=saving.__getitem__, default=None)
        if best is None or saving[best] <= 0:
            break
        groups.append((best, [(word, pending.pop(word)) for word in sorted(holders[best])]))
    return [*groups, (b"", sorted(pending.items()))]


_IDENTIFIER = re.compile(rb"[A-Za-z0-9_]+")
_ANCHOR = 4  # bytes of the substrings words are grouped under
_SAMPLE = 24  # files sampled to tell a rare substring from a common one
_GROUP_FROM = 20_000  # words times files from which grouping the words pays for its sampling
_TOKENIZE_FROM = 64  # words at once from which splitting each file into identifiers is cheaper


def _names_word(data: bytes, needle: bytes) -> bool:
    at = data.find(needle)
    while at != -1:
        if _whole_word_at(data, at, len(needle)):
            return True
        at = data.find(needle, at + 1)
    return False


_ASCII_WORD = frozenset(b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _whole_word_at(data: bytes, at: int, length: int) -> bool:
    """Whether the identifier found at `at` is a whole word there (as `\\bword\\b` on the text)."""
    return not (at and _word_char_ending(data, at - 1)) and not (at + length < len(data) and _word_char_starting(data, at + length))


def _word_char_ending(data: bytes, end: int) -> bool:
    """Whether the character whose last byte is at `end` is a word character."""
    byte = data[end]
    if byte < 0x80:
        return byte in _ASCII_WORD
    start = end
    while start > 0 and end - start < 3 and data[start] & 0xC0 == 0x80:  # back to the lead byte
        start -= 1
    return _is_word(data[start:end + 1])


def _word_char_starting(data: bytes, start: int) -> bool:
    byte = data[start]
    if byte < 0x80:
        return byte in _ASCII_WORD
    size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
    return _is_word(data[start:start + size])


def _is_word(encoded: bytes) -> bool:
    char = encoded.decode("utf-8", "replace")[:1]
    return char.isalnum() or char == "_"
