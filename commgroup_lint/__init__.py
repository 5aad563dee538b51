"""commgroup-lint: find and fix communication-group bugs in distributed PyTorch code."""

__version__ = "0.1.0"
