"""The working context of one decision: the state so far, the outbox so far, the policy in force.

`decide` creates one `BatchContext` per call and passes it through its stages in order; each
stage (`handle_*`) replaces `context.state` with a new frozen `ControllerState` and appends
messages to `context.outbox`. The context is local to one `decide` call: nothing here outlives
it, reads a clock or does I/O, so `decide` as a whole stays a pure function.

`now_ms` is the batch's event time (`BatchInputs.now_ms`); `now_s` the same in seconds, the unit
the planning core's stall rule and `StepInFlight.started_at` use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from handlers.outbox import Outbox
from handlers.micro_batch import BatchInputs
from handlers.policy import Policy, effective_policy
from state.model import ControllerState


@dataclass
class BatchContext:
    state: ControllerState
    inputs: BatchInputs
    base_policy: Policy
    outbox: Outbox
    policy: Policy = field(init=False)
    plans_made: int = 0  # numbering of plans (reassignment ids, proposal ids) within the batch
    # What the decision did, as the handlers decide it (`handlers.micro_batch.BatchReport`).
    refused: Counter = field(default_factory=Counter)  # schema → events whose content was refused
    steps_completed: list = field(default_factory=list)
    bytes_moved: int = 0

    def __post_init__(self) -> None:
        self.refresh_policy()

    def refresh_policy(self) -> None:
        """Re-read the SetConfig overrides (after a SetConfig request changed them)."""
        self.policy = effective_policy(self.base_policy, self.state.config)

    @property
    def now_ms(self) -> int:
        return self.inputs.now_ms

    @property
    def now_s(self) -> float:
        return self.inputs.now_ms / 1000.0

    def next_plan_id(self, kind: str) -> str:
        """A deterministic id for a plan decided in this batch: `b<batch>-<kind>-<n>`."""
        self.plans_made += 1
        return f"b{self.inputs.batch_id}-{kind}-{self.plans_made}"

    def next_command_sequence(self) -> int:
        """The number of a command not tied to a reassignment (throttles, cordons: `handlers.outbox`
        IDS), taken from `ControllerState.command_sequence`."""
        sequence = self.state.command_sequence + 1
        self.state = self.state.with_changes(command_sequence=sequence)
        return sequence

    def open_alert(self, key: str) -> bool:
        """Mark a condition as signalled; False if it already was (signal once per condition)."""
        if key in self.state.open_alerts:
            return False
        self.state = self.state.with_changes(open_alerts=self.state.open_alerts | {key})
        return True

    def close_alerts(self, keys) -> None:
        keys = frozenset(keys) & self.state.open_alerts
        if keys:
            self.state = self.state.with_changes(open_alerts=self.state.open_alerts - keys)
