"""Root pytest configuration: plugins must be named here, at the rootdir (pytest's rule)."""

pytest_plugins = ["pytester"]  # the runtime plugin's tests run pytest in-process through pytester
