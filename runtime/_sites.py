"""Find the user's call site: the first frame that is not torch, the shim, or a helper.

A helper is a function that allocates a group-bound buffer or runs a collective on the
caller's behalf (``get_local_dp_buffer``, ``dp_gather_partial``, a group coordinator's
``all_reduce``). The site reported is the line in the model that calls the helper, which
is the line the static linter reports.

A module is a helper when its name is one of the profile's helper modules (or inside one of
them), or when it sets ``__commgroup_lint_helper__ = True`` at module level. A single
function is a helper when the profile names it as an allocator or a collective, or when it
is decorated with :func:`helper`.
"""

from __future__ import annotations

import functools
import os
import sys
import types

from ._report import Site

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

#: Code torch generates at run time is torch's too: an FX graph's forward, and code whose
#: file name is a torch source file with a suffix (AOTAutograd's generated wrappers).
_GENERATED = "<eval_with_key>"


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    file = getattr(torch, "__file__", None)
    return os.path.dirname(file) + os.sep if file else None

_HELPER_CODES: set = set()
_HELPER_VERSION = [0]  # bumped by helper(): finders drop their per-code verdicts


def helper(func):
    """Decorator: mark ``func`` as an allocator or collective helper, so sites skip its frame."""
    code = getattr(func, "__code__", None)
    if code is not None:
        _HELPER_CODES.add(code)
        _HELPER_VERSION[0] += 1
    return func


class SiteFinder:
    """Walks the stack from the caller, stopping at the first user frame.

    The skip verdict is memoised per code object (and per module name), and the
    :class:`Site` per instruction, so a walk on a warm path is a few dict lookups per frame
    and allocates nothing. Both are keyed by ``id(code)`` (a code object's hash reads its
    whole body, at every lookup), the code objects held so that no id is reused; and by the
    instruction (``f_lasti``), not the line, which a frame computes by scanning its code's
    line table: the line is read once per call site.
    """

    def __init__(self, helper_modules=()):
        self.prefixes = tuple(_ALWAYS_SKIPPED) + tuple(helper_modules)
        self._module_cache: dict[str, bool] = {}
        self._code_cache: dict[int, bool] = {}  # id(code) -> skipped?
        self._sites: dict[tuple[int, int], Site] = {}  # (id(code), f_lasti) -> Site
        self._held: dict[int, object] = {}  # id(code) -> code, for the keys above
        self._version = _HELPER_VERSION[0]

    def _module_skipped(self, name: str, f_globals: dict) -> bool:
        cached = self._module_cache.get(name)
        if cached is None:
            cached = f_globals.get("__commgroup_lint_helper__") is True or any(
                name == p or name.startswith(p + ".") for p in self.prefixes
            )
            self._module_cache[name] = cached
        return cached

    def _skipped(self, code, frame) -> bool:
        if self._version != _HELPER_VERSION[0]:
            self._code_cache.clear()
            self._version = _HELPER_VERSION[0]
        torch_dir = _torch_dir()
        skipped = (
            code in _HELPER_CODES
            or code.co_filename.startswith(_GENERATED)
            or (torch_dir is not None and code.co_filename.startswith(torch_dir))
            or self._module_skipped(frame.f_globals.get("__name__", ""), frame.f_globals)
        )
        self._held[id(code)] = code
        self._code_cache[id(code)] = skipped
        return skipped

    def _site(self, frame) -> Site:
        code = frame.f_code
        self._held[id(code)] = code
        key = (id(code), frame.f_lasti)
        site = self._sites.get(key)
        if site is None:
            site = self._sites[key] = Site(code.co_filename, frame.f_lineno, code.co_name)
        return site

    def find(self, start_depth: int = 1) -> Site:
        """The site of the first user frame from ``start_depth`` frames up (1: the caller); the
        outermost frame when every frame is skipped. On a warm path the walk is a dict lookup
        per frame."""
        frame, last = self._first_user(sys._getframe(start_depth))
        if frame is not None:
            site = self._sites.get((id(frame.f_code), frame.f_lasti))  # _site, inline
            return site if site is not None else self._site(frame)
        return self._site(last) if last is not None else Site("<unknown>", 0)

    def user_frame(self, start_depth: int = 1) -> types.FrameType | None:
        """The first user frame from ``start_depth`` frames up (1: the caller), or None."""
        return self._first_user(sys._getframe(start_depth))[0]

    def _first_user(self, frame: types.FrameType | None) -> tuple[types.FrameType | None, types.FrameType | None]:
        """The first frame from ``frame`` up that is not skipped (or None), and the last one walked."""
        cache = self._code_cache
        if self._version != _HELPER_VERSION[0]:
            cache.clear()
            self._version = _HELPER_VERSION[0]
        last = None
        while frame is not None:
            code = frame.f_code
            skipped = cache.get(id(code))
            if skipped is None:
                skipped = self._skipped(code, frame)
            if not skipped:
                return frame, last
            last = frame
            frame = frame.f_back
        return None, last


@functools.cache
def finder_for(helper_modules: tuple[str, ...]) -> SiteFinder:
    """The one finder of these helper modules: a shim installed again (each ``enforce`` block,
    each test) finds its caches warm."""
    return SiteFinder(helper_modules)
