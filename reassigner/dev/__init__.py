"""Development tooling: the real local stack (`local`), the demo and the harness the scenario
tests use (`demo`). No production module may import it (import-linter layers contract)."""
