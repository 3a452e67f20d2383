"""CLI command groups. Each module exposes `register(app)`; `reassigner.cli` lists them."""
