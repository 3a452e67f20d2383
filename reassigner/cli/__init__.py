"""The `reassigner` command line: the composition root, the only room that wires every other.

`main` assembles the command modules (explicit imports), `options` declares the shared flags once,
`printing` turns a `ReassignerError` into one line on stderr, `connections` resolves where the
clients connect (flags, else the local stack).
"""
