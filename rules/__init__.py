"""The rules, one module each (installed as `commgroup_lint.rules`)."""
