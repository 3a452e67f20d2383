"""The `reassigner` command line: the composition root, the only room that wires every other.

`main` assembles the command modules (explicit imports; each has `register(app)`). What they
share: `options` (the shared flags, declared once, and the logging, stop-signal and metrics
set-up), `connections` (flags → settings and where the clients connect: `connect`), `printing`
(the consoles, and a `ReassignerError` as one line on stderr).

    local, demo            the local stack, and the demo on it
    plan, simulate         offline: a snapshot file in, a plan, steps or a simulated run out
    edge, run              the processes: watcher, executor, snapshot; the pipeline
    requests, config       requests to the pipeline (`request ...`, `config set`), `config get`
    views                  `list`, `status` (rendered by `reassigner.operator.tables`)
    alerts, status_server  `alerts [--follow]`, `alerts webhook`, `status-server`
"""
