"""commgroup-lint: find and fix communication-group bugs in distributed PyTorch code."""

__version__ = "0.1.0"

HOMEPAGE = "https://github.com/commgroup-lint/commgroup-lint"
RULES_URL = f"{HOMEPAGE}/blob/main/docs/rules/"
"""Where each rule's page (`docs/rules/CGLxxx.md`) is published; SARIF and the docs link here."""


def rule_url(code: str) -> str:
    return f"{RULES_URL}{code}.md"
