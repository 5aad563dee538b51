"""What a parsed profile says that the analysis can never use, and the names it pins.

A profile can be well-typed and still describe nothing: a method listed by its qualified name
(methods are matched by their name alone), an entry that names no module (the analysis only
ever looks up qualified names), a method of a group wrapper (a call on a group never reaches
it: the wrapper's result is the group itself). Each is an error that names its key and says
what to write instead, so the author learns it when the profile loads rather than by diffing
`sites`. `[profile] pinned` keeps entries the scanned code would otherwise override; it must
name entries of the profile itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from commgroup_lint.profile import Profile, _Reader

# The tables keyed by qualified name, as `Profile` holds them: (key in the TOML, attribute).
_QUALIFIED = (("getters", "getters"), ("attributes", "attributes"), ("wrappers", "wrappers"), ("sizes", "sizes"),
              ("allocators", "allocators"), ("contexts", "contexts"), ("registrations", "registrations"),
              ("pool_contexts", "pool_contexts"), ("pool_bindings", "pool_bindings"),
              ("collectives", "collectives"))


def entry_names(p: Profile) -> dict[str, str]:
    """Every qualified name the profile describes, with the table (as written) describing it."""
    found: dict[str, str] = {}
    for table, attr in _QUALIFIED:
        found.update((name, table) for name in getattr(p, attr))
    found.update((name, "objects.builders") for name in p.objects.builders)
    found.update((name, "objects.consumers") for name in p.objects.consumers)
    return found


def check_profile(r: _Reader, p: Profile, pinned: list[str]) -> None:
    """Raise (through `r`, naming the key) for what can never match, and for pins of names the
    profile does not describe."""
    names = entry_names(p)
    for name, table in names.items():
        if "." not in name.partition("(")[0]:
            raise r.fail(r.at(table, name), "names no module, so no call ever matches it: write the qualified name "
                                            "(`module.function`, `module.Class.method`); a method called on a group "
                                            "goes in `[methods]`")
        owner = name.partition("(")[0].rpartition(".")[0]
        if owner in p.wrappers and table != "wrappers":
            raise r.fail(r.at(table, name), f"is a method of `{owner}`, a `[wrappers]` entry: building one gives the "
                                            "group itself, so a call on it never reaches this entry; list the "
                                            "method's name under `[methods]` instead")
    lists = [("methods", f, getattr(p.methods, f)) for f in ("collective", "allocator", "same_group",
                                                             "register_pool", "size")]
    lists += [("objects.methods", "consumer", p.objects.consumer_methods),
              ("objects.methods", "allocator", p.objects.allocator_methods),
              ("objects.methods", "handle", p.objects.handle_methods),
              ("group_attributes", "same_group", p.same_group_attributes),
              ("group_attributes", "size", p.size_group_attributes)]
    for where, key, values in lists:
        for value in sorted(values):
            if not value.isidentifier():
                raise r.fail(f"{where}.{key}", f"'{value}' is not a name: methods and attributes are matched by "
                                               "their name alone (`all_reduce`); a function goes under its qualified "
                                               "name in a table such as `[collectives]`")
    for name in pinned:
        if name not in names:
            raise r.fail("profile.pinned", f"'{name}' is no entry of this profile: pin the qualified name of one "
                                           "of its entries (a table key such as `allocators.\"pkg.mod.f\"`)")
