"""Find the user's call site: the first frame that is not torch, the shim, or a helper.

A helper is a function that allocates a group-bound buffer or runs a collective on the
caller's behalf (``get_local_dp_buffer``, ``dp_gather_partial``, a group coordinator's
``all_reduce``). The site reported is the line in the model that calls the helper, which
is the line the static linter reports.

A module is a helper when its name is one of the configured helper modules (or inside
one of them), or when it sets ``__commgroup_lint_helper__ = True`` at module level.
A single function is a helper when decorated with :func:`helper`.
"""

from __future__ import annotations

import sys

from ._report import Site

#: SGLang's modules whose functions allocate bound buffers or run collectives for the caller.
DEFAULT_HELPER_MODULES = (
    "sglang.srt.layers.dp_attention",
    "sglang.srt.distributed",
)

#: Always skipped: torch itself, the shim, and the stdlib glue between them and the user.
_ALWAYS_SKIPPED = (
    "torch",
    "commgroup_lint.runtime",
    "contextlib",
    "functools",
    "typing_extensions",
    "warnings",
    "importlib",
)

_HELPER_CODES: set = set()


def helper(func):
    """Decorator: mark ``func`` as an allocator or collective helper, so sites skip its frame."""
    code = getattr(func, "__code__", None)
    if code is not None:
        _HELPER_CODES.add(code)
    return func


class SiteFinder:
    """Walks the stack once per call; memoises the verdict per code object and module."""

    def __init__(self, helper_modules=DEFAULT_HELPER_MODULES):
        self.prefixes = tuple(_ALWAYS_SKIPPED) + tuple(helper_modules)
        self._module_cache: dict[str, bool] = {}

    def _module_skipped(self, name: str, f_globals: dict) -> bool:
        cached = self._module_cache.get(name)
        if cached is None:
            cached = f_globals.get("__commgroup_lint_helper__") is True or any(
                name == p or name.startswith(p + ".") for p in self.prefixes
            )
            self._module_cache[name] = cached
        return cached

    def find(self, start_depth: int = 1) -> Site:
        frame = sys._getframe(start_depth)
        last = None
        while frame is not None:
            code = frame.f_code
            name = frame.f_globals.get("__name__", "")
            if code not in _HELPER_CODES and not self._module_skipped(name, frame.f_globals):
                return Site(code.co_filename, frame.f_lineno, code.co_name)
            last = frame
            frame = frame.f_back
        if last is not None:  # everything was a helper: report the outermost frame
            return Site(last.f_code.co_filename, last.f_lineno, last.f_code.co_name)
        return Site("<unknown>", 0)
