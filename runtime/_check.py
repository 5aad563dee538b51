"""The check in front of every collective: one flat function, the shim's hot path.

Every hook ends here: the collectives wrapped as module attributes, the ones reached through
``handle_torch_function``, the functional and symmetric-memory ops' kernels, the profile's
group classes. The passing case is decided inline; verdicts come from the active shim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._groups import _ProcessGroup, as_process_group
from ._state import TLS, Active
from ._table import TABLE


def checked(func: Callable[..., Any], name: str, position: int | None = None, keyword: str = "group",
            group_attr: str | None = None, traced: bool = False) -> Callable[..., Any]:
    """``func``, a collective, with the shim's check in front: every hook ends here.

    The group is the argument ``keyword`` (or at ``position``); for a method of a group
    wrapper (``group_attr``), the wrapper's attribute of that name (or the wrapper). This
    is the shim's hot path, kept flat: the passing case (no argument bound, or every bound
    one allocated under and registered with this very group) is decided inline and builds
    nothing; anything else goes to :meth:`Shim.verdicts`. What ``func`` runs is not checked
    again (the thread's depth of checked collectives). With ``traced``, ``func`` itself runs
    while torch.compile traces the call (a group class's method: the compiler does not know
    the wrapper, unlike torch's collectives)."""

    def collective(*args: Any, **kwargs: Any) -> Any:
        shim = Active.shim
        if shim is None or TLS.depth or traced and shim.compiling():
            return func(*args, **kwargs)
        if group_attr is not None:
            g = getattr(args[0], group_attr, None) or args[0]
        elif keyword in kwargs:
            g = kwargs[keyword]
        else:
            g = args[position] if position is not None and position < len(args) else None
        pg = g if type(g) is _ProcessGroup else as_process_group(g)
        # Keyword arguments are scanned unless the group is all they hold (the usual call).
        only_group = not kwargs or len(kwargs) == 1 and keyword in kwargs
        passing = shim.divergence is None and (
            not (TABLE.buffers or TABLE.segments)
            or TABLE.passes(args, pg) and (only_group or TABLE.passes(kwargs.values(), pg))
        )
        TLS.depth += 1
        try:
            found = None if passing else shim.verdicts(name, args, kwargs, pg)
            return shim.report(found, func, args, kwargs) if found else func(*args, **kwargs)
        finally:
            TLS.depth -= 1

    return collective
