"""Program analysis: lowering to a small IR, name resolution and the group dataflow."""
