"""Cordons (Kafka 4.3+, KIP-1066): no new replica lands on a broker the product drains, nor on
a dir it empties.

Kafka's own placer puts a new topic's or a new partition's replicas on any unfenced broker, the
one being drained included, so a drain never ends on a cluster that creates topics; and a broker
puts a new replica in any of its online dirs, the one the product is emptying included. A
broker's `cordoned.log.dirs` names the dirs that take no new replica (`*`: all of them, the
whole broker); the replicas already there stay and can be moved.

RULE: what the product wants cordoned (`compute_wanted_cordons`), on a Kafka that has cordons
(`KafkaFacts.has(CORDONS)`), by broker (`WHOLE`, or the dirs, sorted):
- its draining brokers (`Broker.draining`: from a decommission until a recommission, or a cancel
  that stops the drain): WHOLE;
- in mode auto, the full dirs it empties: a dir under disk pressure (its `DiskPressure` mark is
  open, `handlers.disk_pressure`: until the volume is under the high-water mark again), of an
  alive broker. A failed dir is not cordoned: Kafka puts no new replica on an offline dir, and one
  back online is a dir like any other again.
`ControllerState.cordoned` holds what it asked the executor for. `reconcile_cordons` compares
the two, broker by broker, and issues `Cordon` (with the wanted dirs; none = `*`) and `Uncordon`
commands (`Command.action`, schema version 10), numbered by `command_sequence`
(`cordon-<n>-<broker id>:0:<kind>`: its result names its broker), keyed `cordon` (one partition of
the commands topic: the executor applies them in the order decided):
- wanted and not asked, or more wanted than asked (dirs added, or dirs widened to the whole
  broker): one Cordon with all that is wanted (the executor adds to what it set);
- asked and no longer wanted: one Uncordon (the executor writes back what was there before);
- asked for more than is wanted now (the whole broker narrowed to dirs, a dir dropped): an
  Uncordon, then a Cordon with what is wanted;
- `UNSURE` (a Cordon or Uncordon the executor could not apply, `forget_failed_cordon`: what holds
  is not known): an Uncordon, then a Cordon if anything is wanted.
It runs when the draining set changes (decommission, recommission, a cancel that stops a drain),
when a disk-pressure mark opens or closes, at each snapshot that
tells which Kafka runs (an upgrade that finalizes cordons; and the retry of a failed command) and
when a broker that is draining or cordoned comes back: over the brokers, never per partition.
- A broker that is not alive, or gone from the cluster, keeps what it has (its config cannot be
  written; Kafka places nothing on it meanwhile); it is reconciled when it comes back.
- A decommission's Cordon is decided before its plan's first step, in the same batch. The two
  are on different partitions of the commands topic, so the executor may apply a step first; no
  harm: a step only moves replicas off the broker. A relief's dir cordon comes after the relief's
  first moves, for the same reason no harm.
- On a Kafka without cordons nothing is issued and nothing is forgotten: `status` says that new
  topics may still land on the draining brokers; an upgrade later cordons them.
- What the executor does with them (whose cordons, what it restores) is its rule
  (`reassigner.edge.cordons`): only the product's cordons are ever removed.
INVARIANTS: `cordoned` maps each broker to what the product last asked to cordon there (or
`UNSURE`) and has not asked to uncordon since; an Uncordon of a broker is never decided after its
Cordon in one batch.
"""

from __future__ import annotations

import re
from typing import Mapping

from handlers.context import BatchContext
from handlers.disk_pressure import compute_marked_dirs
from planning.model import CORDONS

CORDON_ID = re.compile(r"^cordon-(\d+)-(\d+):0:(?:Cordon|Uncordon)$")
"""`cordon-<command sequence>-<broker id>:0:<kind>`: one command per broker."""

WHOLE: tuple[str, ...] = ()
"""Every dir of the broker: `cordoned.log.dirs=*` (a Cordon with no dirs)."""

UNSURE: tuple[str, ...] = ("",)
"""A broker whose Cordon or Uncordon failed: what of ours holds there is not known (no dir is
named ''). The next reconcile uncordons it first (RULE)."""

Cordons = Mapping[int, tuple[str, ...]]


def compute_wanted_cordons(context: BatchContext) -> Cordons | None:
    """What should be cordoned, by broker (RULE), or None when the cluster's Kafka has no
    cordons (or is not known yet): then nothing is to change. A broker that is not alive keeps
    what it has: its config cannot be written (and Kafka places nothing on it meanwhile)."""
    state = context.state
    kafka = state.kafka
    if kafka is None or not kafka.has(CORDONS):
        return None
    cluster = state.cluster
    alive = {b.id: b for b in cluster.brokers if b.alive}
    dirs: dict[int, set[str]] = {}
    if context.policy.mode == "auto":
        for broker_id, path in compute_marked_dirs(state.open_alerts):
            if broker_id in alive:
                dirs.setdefault(broker_id, set()).add(path)
    wanted = {b: tuple(sorted(paths)) for b, paths in dirs.items()}
    wanted |= {b.id: WHOLE for b in alive.values() if b.draining}
    wanted |= {b: asked for b, asked in state.cordoned.items() if b not in alive}  # dead or gone: kept
    return wanted


def handle_cordons_after_events(context: BatchContext, kafka_told: bool, came_up) -> None:
    """Reconcile when a snapshot told which Kafka runs (an upgrade, and a periodic retry of a
    cordon that failed) or when a broker that is draining or cordoned came back."""
    state = context.state
    if kafka_told:  # the state holds what it told
        reconcile_cordons(context, f"the cluster runs Kafka {state.kafka.release}")
    elif any(b in state.cordoned or ((broker := state.cluster.broker(b)) is not None and broker.draining)
             for b in came_up):
        reconcile_cordons(context, f"broker{'s' if len(came_up) > 1 else ''} "
                                   f"{', '.join(map(str, sorted(came_up)))} back")


def forget_failed_cordon(context: BatchContext, kind: str, command_id: str) -> None:
    """A Cordon or Uncordon the executor could not apply: what holds on its broker is no longer
    known (`UNSURE`), so that the next reconcile (the next snapshot, or the broker coming back)
    uncordons it and asks again for what is wanted."""
    named = CORDON_ID.match(command_id)
    if named is None:  # not one of ours: nothing to forget
        return
    broker_id, have = int(named.group(2)), context.state.cordoned
    if have.get(broker_id) != UNSURE:
        context.state = context.state.with_changes(cordoned={**have, broker_id: UNSURE})


def compute_cordon_commands(wanted: Cordons, have: Cordons) -> list[tuple[int, str, tuple[str, ...]]]:
    """(broker, kind, dirs) of the commands that make `have` the `wanted` (RULE), by broker."""
    commands = []
    for broker_id in sorted(set(wanted) | set(have)):
        want, had = wanted.get(broker_id), have.get(broker_id)
        if want == had:
            continue
        if had is not None and (want is None or had == UNSURE or _narrower(want, had)):
            commands.append((broker_id, "Uncordon", ()))
        if want is not None:
            commands.append((broker_id, "Cordon", want))
    return commands


def _narrower(want: tuple[str, ...], had: tuple[str, ...]) -> bool:
    """Whether `want` leaves out some of what `had` cordons (a Cordon only adds)."""
    return want != WHOLE and (had == WHOLE or not set(had) <= set(want))


def reconcile_cordons(context: BatchContext, reason: str) -> None:
    """Issue the Cordon and Uncordon commands that make `cordoned` the wanted cordons (RULE)."""
    wanted = compute_wanted_cordons(context)
    if wanted is None:
        return
    have = context.state.cordoned
    for broker_id, kind, dirs in compute_cordon_commands(wanted, have):
        sequence = context.next_command_sequence()  # one broker a command: its result names it (CORDON_ID)
        context.outbox.action_command(f"cordon-{sequence}-{broker_id}:0:{kind}", "cordon", reason,
                                      {"kind": kind, "broker_ids": [broker_id], "log_dirs": list(dirs)})
    if wanted != have:
        context.state = context.state.with_changes(cordoned=wanted)
