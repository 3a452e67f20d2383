"""The step rule: how one partition walks from its current replicas to its final target.

A reassignment of one partition is cut into **steps**. Each step is one AlterPartitionReassignments
call with a target list (TR): Kafka adds the new replicas, waits until they join the ISR, then
drops the replicas TR does not hold. Small steps keep the extra replication traffic of one
partition at a few replicas at a time (KIP-435) instead of copying every new replica at once.

GOALS, in priority order:
1. Keep the partition writable: when it is under `min.insync.replicas` (M), the next step adds as
   many replicas as are missing, even beyond R.
2. Move leadership early: a new preferred leader is added first, alone, and elected as soon as it
   is in sync, so the old leader sheds its load before anything else moves.
3. Bound the work in flight: a step adds at most R replicas (less the surplus the partition
   already carries) and drops at most R.
4. End exactly at the final target, order included: the last step's TR equals FTR.
CONSTRAINTS (a step that breaks one is a bug; `_require_*` guards raise):
- CR and FTR are non-empty, without duplicates; R >= 1; M >= 1.
- A step never holds a broker twice; every step makes progress (adds or drops a replica, or
  reorders once), so the sequence terminates after at most |to_add| + |to_drop| + 1 steps.
ALGORITHM (`compute_next_step`, a worked example there). Inputs: CR, FTR (ordered), ISR, R, M.
- `to_add` = FTR members not in CR, in FTR order. `to_drop` = CR members not in FTR: first the
  out-of-sync ones that are not eligible leaders (ELR, KIP-966: out of the ISR but holding every
  committed record, a clean leader if the ISR dies), then the eligible leaders, then the in-sync
  ones, each in CR order. `deficit` = max(0, M - |CR ∩ ISR|).
- CR == FTR: done (no step). Same brokers, another order: one step to FTR, electing FTR[0].
- FTR[0] not in CR: add FTR[0] alone (plus deficit - 1 more from `to_add` when under min ISR),
  drop nothing, put it first; elect it once it is in sync.
- Otherwise: surplus = max(0, |CR| - |FTR|); add n_add = min(|to_add|, max(R - surplus, deficit))
  from the front of `to_add`; drop n_drop = min(|to_drop|, R, |CR| + n_add - |FTR|) (never
  below zero) from the front of `to_drop`.
- TR order: FTR members (of the new set) in FTR order, then the remaining CR members in CR order.
  A step whose TR[0] differs from CR[0], or that drops the current leader, is a leader movement;
  a step whose TR[0] differs from CR[0] elects TR[0] once it is complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from schemas.errors import InvalidConfigError, InvalidReplicaAssignmentError


@dataclass(frozen=True)
class Step:
    """One AlterPartitionReassignments call for one partition.

    target: the target replica list (TR) sent to Kafka; TR[0] is the preferred leader after it.
    adding: brokers in TR but not in the current replicas, in TR order.
    removing: brokers in the current replicas but not in TR, in the order they were chosen.
    elect_leader: once Kafka has finished the step, elect TR[0] (preferred-leader election).
    leader_movement: TR[0] differs from the current preferred leader, or the step drops the
        current leader; counts against `max.concurrent.leader.movements`.
    """

    target: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    elect_leader: bool = False
    leader_movement: bool = False

    @property
    def moved_brokers(self) -> frozenset[int]:
        """Brokers this step adds a replica to or drops one from (the per-broker limit B)."""
        return frozenset(self.adding) | frozenset(self.removing)


def compute_next_step(
    current: Sequence[int],
    final_target: Sequence[int],
    in_sync: Collection[int],
    max_replica_movements: int,
    min_insync_replicas: int,
    *,
    leader: int | None = None,
    eligible_leaders: Collection[int] = (),
) -> Step | None:
    """The next step from `current` (CR) towards `final_target` (FTR), or None when CR == FTR.

    `in_sync` is the partition's ISR now, `eligible_leaders` its eligible leader replicas (out of
    the ISR, kept by Kafka while the ISR is below min ISR; they only change the drop order).
    `leader` is the current leader if known (it defaults to CR[0]); it only decides whether the
    step counts as a leader movement.

    Worked example (R = 2, M = 1, leader 0), from KIP-435:
        (0, 1, 2, 3, 4)      start
        (5, 0, 1, 2, 3, 4)   +5, new preferred leader 5 elected   (FTR[0] not in CR: alone)
        (5, 6, 2, 3, 4)      -[0, 1] +[6]      surplus 1: n_add = min(4, 2-1) = 1, n_drop = min(5, 2, 6+1-5) = 2
        (5, 6, 7, 8, 4)      -[2, 3] +[7, 8]   n_add = 2, n_drop = min(3, 2, 5+2-5) = 2
        (5, 6, 7, 8, 9)      -[4] +[9]         equals the final target
    """
    current_replicas = tuple(current)
    final = tuple(final_target)
    _require_replica_list(current_replicas, "current replicas")
    _require_replica_list(final, "final target")
    _require_positive(max_replica_movements, "max replica movements")
    _require_positive(min_insync_replicas, "min insync replicas")
    if current_replicas == final:
        return None
    leader = current_replicas[0] if leader is None else leader

    if set(current_replicas) == set(final):
        # Only the order differs: Kafka applies a pure reorder at once, nothing is copied.
        return Step(
            target=final,
            elect_leader=True,
            leader_movement=final[0] != current_replicas[0],
        )

    in_sync_set = set(in_sync)
    final_set = set(final)
    current_set = set(current_replicas)
    to_add = [b for b in final if b not in current_set]
    # Out-of-sync replicas go first: dropping them costs no redundancy; of those, the eligible
    # leaders last: each is a clean copy, the one a leaderless partition is elected from.
    clean = in_sync_set | set(eligible_leaders)
    leaving = [b for b in current_replicas if b not in final_set]
    to_drop = ([b for b in leaving if b not in clean] + [b for b in leaving if b in clean and b not in in_sync_set]
               + [b for b in leaving if b in in_sync_set])
    deficit = max(0, min_insync_replicas - len(current_set & in_sync_set))

    if final[0] not in current_set:
        # to_add starts with FTR[0]; under min ISR, bring the partition back up in the same step.
        adding = to_add[: max(1, deficit)]
        dropping: list[int] = []
    else:
        surplus = max(0, len(current_replicas) - len(final))
        n_add = min(len(to_add), max(max_replica_movements - surplus, deficit))
        n_drop = max(0, min(len(to_drop), max_replica_movements, len(current_replicas) + n_add - len(final)))
        adding = to_add[:n_add]
        dropping = to_drop[:n_drop]

    target = _order_target(current_replicas, final, set(adding), set(dropping))
    return Step(
        target=target,
        adding=tuple(b for b in target if b in set(adding)),
        removing=tuple(dropping),
        elect_leader=target[0] != current_replicas[0],
        leader_movement=target[0] != current_replicas[0] or leader in dropping,
    )


def compute_step_sequence(
    current: Sequence[int],
    final_target: Sequence[int],
    in_sync: Collection[int],
    max_replica_movements: int,
    min_insync_replicas: int,
) -> tuple[Step, ...]:
    """Every step from CR to FTR, assuming each step completes with all its replicas in sync.

    The first step sees the given ISR; after a step, the ISR is its whole target list.
    """
    steps: list[Step] = []
    replicas = tuple(current)
    isr: Collection[int] = in_sync
    # Each step adds or drops at least one replica, or is the single final reorder.
    bound = len(set(current) | set(final_target)) * 2 + 2
    while (step := compute_next_step(replicas, final_target, isr, max_replica_movements, min_insync_replicas)) is not None:
        steps.append(step)
        if len(steps) > bound:  # pragma: no cover - a broken rule must fail loudly, not spin
            raise AssertionError(f"step rule did not terminate from {tuple(current)} to {tuple(final_target)}")
        replicas = step.target
        isr = step.target
    return tuple(steps)


def _order_target(
    current: tuple[int, ...], final: tuple[int, ...], adding: set[int], dropping: set[int]
) -> tuple[int, ...]:
    """FTR members of the new set in FTR order, then the remaining CR members in CR order."""
    kept = [b for b in current if b not in dropping]
    members = set(kept) | adding
    head = [b for b in final if b in members]
    head_set = set(head)
    return tuple(head + [b for b in kept if b not in head_set])


def _require_replica_list(replicas: tuple[int, ...], what: str) -> None:
    if not replicas:
        raise InvalidReplicaAssignmentError(f"{what} is empty: a partition needs at least one replica")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(f"{what} {list(replicas)} holds a broker twice")
    if any(b < 0 for b in replicas):
        raise InvalidReplicaAssignmentError(f"{what} {list(replicas)} holds a negative broker id")


def _require_positive(value: int, what: str) -> None:
    if value < 1:
        raise InvalidConfigError(f"{what} must be at least 1, got {value}")
