"""Shipped engine profiles (TOML data files)."""
