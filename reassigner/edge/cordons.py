"""Cordons the executor sets and removes (Kafka 4.3+, KIP-1066), computed without I/O.

A broker's dynamic `cordoned.log.dirs` names the dirs that take no new replica (`*` = all of
them: the whole broker); the replicas already there stay. The pipeline asks for a cordon while it
drains a broker and for its removal at a recommission (`handlers.cordons`); the executor applies
a `Cordon` or `Uncordon` command (`Command.action`) per broker under the rules below.

WHOSE (as for throttles, `reassigner.edge.throttles`): the executor records in Redis what it set
(`reassigner.edge.ledger`, the same records, field `cordon:<broker id>`: the value it wrote and
the value that was there before), **before** it writes to Kafka, and removes only that:
- nothing cordoned on the broker → ours is written and recorded (previous: none);
- someone else's cordon already covers what is wanted (`*`, or every dir asked for) → left as it
  is, nothing recorded: the uncordon will leave it too;
- someone else cordoned some dirs and we want the whole broker → `*` is written (Kafka refuses
  `*` beside other entries), theirs recorded as the previous value; wanting dirs → ours are
  appended to theirs;
- ours in force → asked again, nothing changes (idempotent); more dirs are appended;
- Uncordon: ours still in force (the value is the one we wrote) → the previous value is written
  back (none: the config is deleted); changed by someone since → theirs now: left as it is; in
  both cases our record is forgotten. No record (not ours, or the records were lost with the
  store) → left as it is, and said (`kept`).
Entries are compared as Kafka lists them (comma-separated, spaces ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

WHOLE_BROKER = "*"


@dataclass(frozen=True)
class CordonChange:
    """What to do on one broker: `record` is written before the config, `forget` after it."""

    write: bool = False
    value: str | None = None  # the config's new value; None deletes it
    record: dict | None = None
    forget: bool = False
    kept: str | None = None  # why nothing of ours is written, for the log


def cordon_field(broker_id: int) -> str:
    """The ownership record's field (beside the throttles', `reassigner.edge.ledger`)."""
    return f"cordon:{broker_id}"


def parse_cordoned(value: str | None) -> list[str]:
    return [entry.strip() for entry in (value or "").split(",") if entry.strip()]


def compute_cordon(log_dirs: Sequence[str], now: str | None, mine: Mapping | None) -> CordonChange:
    """What to write so that `log_dirs` (empty: the whole broker) are cordoned, under WHOSE.
    `now`: the broker's dynamic value (None = not set); `mine`: our record, if any."""
    wanted = [WHOLE_BROKER] if not log_dirs else list(dict.fromkeys(log_dirs))
    present = parse_cordoned(now)
    ours = mine is not None and now == mine.get("value")
    if not ours and (WHOLE_BROKER in present or set(wanted) <= set(present)):
        return CordonChange(kept=f"already cordoned by someone else: cordoned.log.dirs={now}")
    if wanted == [WHOLE_BROKER] or WHOLE_BROKER in present:
        value = WHOLE_BROKER
    else:
        value = ",".join(present + [d for d in wanted if d not in present])
    previous = mine.get("previous") if ours and mine is not None else now
    record = {"value": value, "previous": previous}
    if ours and value == now:
        return CordonChange()
    return CordonChange(write=True, value=value, record=record)


def compute_uncordon(now: str | None, mine: Mapping | None) -> CordonChange:
    """What to write to remove the product's cordon from a broker, and nothing else (WHOSE)."""
    if mine is None:
        return CordonChange(kept="no record that the product cordoned it (never did, or the records were lost "
                                 f"with the store): cordoned.log.dirs={now} left as it is")
    if now != mine.get("value"):
        return CordonChange(forget=True, kept=f"changed by someone since the product cordoned it: "
                                              f"cordoned.log.dirs={now} left as it is")
    return CordonChange(write=True, value=mine.get("previous"), forget=True)
