"""The planning core: pure functions over immutable cluster data (no I/O, no clocks, no globals)."""
