"""Root pytest configuration: plugins must be named here, at the rootdir (pytest's rule)."""

import pytest

pytest_plugins = ["pytester"]  # the runtime plugin's tests run pytest in-process through pytester

# A test that runs a whole pytest session takes seconds to a minute: it is slow, whoever writes
# the next one (see the `slow` marker).
SLOW_FIXTURES = frozenset({"pytester"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
