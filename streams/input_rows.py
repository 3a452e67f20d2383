"""The pipeline's input rows: one typed row per Kafka record, decoded once, into `BatchInputs`.

A micro-batch reaches the driver as `InputRow`s, the raw records of the input topics (topic,
partition, offset, key, value and the schema set version its header names). `compute_batch_inputs`
turns them into the handlers' `BatchInputs`:

- DECODE ONCE: each row is decoded here, with fastavro (`schemas.codec`), with the schema set its
  header names (an older set resolves to the current schema, new fields taking their defaults;
  no header: the current set). Spark decodes nothing on the common path; only a batch too big to
  collect whole is first collapsed in Spark (`streams.batch_plan`), which decodes the
  state-carrying topics there to know what may collapse.
- A row that does not decode becomes a `BadRecord` (a dead letter and a BadEvent alert), in
  (topic, partition, offset) order; the rest of the batch is applied.
- COLLAPSE: a state-carrying event (broker, topic, log dir, partition) is the whole state of its
  subject, so only the latest decoded one per (topic, subject) is kept; the subject is the Kafka
  key, except for log dirs, keyed by broker but each the state of one dir (key and path). A row
  without a key never collapses. Requests, command results and snapshot markers all survive.
  An event implausible in itself (`handlers.event_checks`: a partition -1, 10,000 replicas) takes
  no part in the collapse: it neither supersedes a true event nor is superseded by one, so it
  always reaches the handlers, which refuse it with a BadEvent alert. (A batch too big to
  collect whole is collapsed in Spark on the key alone: there a superseded implausible event is
  dropped unreported; the latest one per subject is still checked.)
- ORDER: entity events before partitions (a partition event may name a broker or topic the same
  batch introduces), then requests, then results; by (partition, offset) inside each topic.
- TIME: the batch's `now_ms` is the greatest event time among its records.

Everything here is pure: no Spark, no I/O.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from handlers.event_checks import compute_event_problem
from handlers.micro_batch import BadRecord, BatchInputs
from runtime.settings import Settings
from schemas.codec import TOPICS, decode, writer_version_from_headers
from schemas.errors import DecodeError

INPUT_TOPICS = ("broker-membership", "topic-state", "disk-failures", "isr-changes", "snapshots", "canary-samples",
                "requests", "command-results")
STATE_CARRYING = ("broker-membership", "topic-state", "disk-failures", "isr-changes")


class InputRow(NamedTuple):
    """One record of an input topic, as Kafka holds it."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    writer_version: int | None = None
    """The schema set version its header names; None: read as the current set."""
    key: bytes | None = None

    @property
    def position(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.offset


def compute_writer_version(headers: Iterable | None) -> int | None:
    """The schema set version a record's `schema_version` header names (Spark gives headers as
    (key, value) rows); None when absent or unreadable: the record is then read as current."""
    try:
        return writer_version_from_headers([(h[0], bytes(h[1]) if h[1] is not None else None)
                                            for h in headers or ()])
    except (DecodeError, TypeError, ValueError):
        return None


def compute_batch_inputs(batch_id: int, rows: Iterable[InputRow | tuple], settings: Settings) -> BatchInputs:
    """The module's rules for one batch's rows (tuples are read as `InputRow`s)."""
    topic_names = {settings.topic(suffix): suffix for suffix in INPUT_TOPICS}
    bad: list[BadRecord] = []
    decoded: list[tuple[InputRow, str, dict]] = []
    latest: dict[tuple[str, str], int] = {}  # (topic, subject) → index in `decoded`
    for row in rows:
        row = row if isinstance(row, InputRow) else InputRow(*row)
        suffix = topic_names[row.topic]
        try:
            record = decode(TOPICS[suffix], bytes(row.value if row.value is not None else b""), row.writer_version)
        except DecodeError as error:
            bad.append(BadRecord(row.topic, row.partition, row.offset, bytes(row.value or b""),
                                 f"not a valid {TOPICS[suffix]} record (Avro decoding failed: {error})"))
            continue
        subject = _subject(suffix, row, record)
        if subject is None or compute_event_problem(TOPICS[suffix], record) is not None:
            decoded.append((row, suffix, record))
            continue
        known = latest.get((row.topic, subject))
        if known is None:
            latest[(row.topic, subject)] = len(decoded)
            decoded.append((row, suffix, record))
        elif (row.partition, row.offset) > (decoded[known][0].partition, decoded[known][0].offset):
            decoded[known] = (row, suffix, record)
    bad.sort(key=lambda b: (b.source_topic, b.partition, b.offset))
    order = {suffix: index for index, suffix in enumerate(INPUT_TOPICS)}
    decoded.sort(key=lambda item: (order[item[1]], item[0].partition, item[0].offset))
    events: list[tuple[str, dict]] = []
    requests: list[dict] = []
    results: list[dict] = []
    origins: dict[tuple[str, int], BadRecord] = {}
    now_ms = 0
    for row, suffix, record in decoded:
        now_ms = max(now_ms, int(record.get("event_time") or 0))
        origin = BadRecord(row.topic, row.partition, row.offset, bytes(row.value or b""), "")
        if suffix == "requests":
            origins[("requests", len(requests))] = origin
            requests.append(record)
        elif suffix == "command-results":
            origins[("command_results", len(results))] = origin
            results.append(record)
        else:
            origins[("events", len(events))] = origin
            events.append((TOPICS[suffix], record))
    return BatchInputs(batch_id=batch_id, now_ms=now_ms, events=tuple(events), requests=tuple(requests),
                       command_results=tuple(results), bad_records=tuple(bad), origins=origins)


def _subject(suffix: str, row: InputRow, record: Mapping) -> str | None:
    """What a state-carrying event is the whole state of (None: it does not collapse)."""
    if suffix not in STATE_CARRYING or row.key is None:
        return None
    key = bytes(row.key).decode(errors="replace")
    return f"{key}:{record.get('path')}" if suffix == "disk-failures" else key
