"""The product's own commands and alerts read back from their topics, as evidence.

Two places trust what the product published when the state store lost what it held: a pipeline
that starts on a store behind its own topics (`streams.store_recovery`), and an executor whose
throttle records are gone (`reassigner.edge.throttles`, ADOPTION). Both read the newest records
of those topics and keep only what the product wrote:

- a record that does not decode as the topic's message (Command or Alert) is skipped;
- where commands are signed (a signing key is given), a command whose signature does not hold
  is skipped: the commands topic may be writable by others (docs: ACLs), the key is not.

`compute_published_record` is pure; `read_published` reads through the reader it is given (a
`runtime.clients.kafka_consumer.TopicReader`) and does nothing else.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from schemas.errors import DecodeError
from schemas.codec import decode, writer_version_from_headers
from schemas.signing import compute_signature_problem

TAIL_RECORDS = 200
"""Records read per partition: enough for the marks and for the steps of a plan's last batches."""


def compute_published_record(record, commands_topic: str, signing_key) -> Mapping | None:
    """A consumed record of the commands or alerts topic, decoded; None when it does not decode,
    or is a command whose signature does not hold where commands are signed (`signing_key`)."""
    command = record.topic == commands_topic
    if command and signing_key is not None and compute_signature_problem(
            signing_key, record.topic, record.key, record.value, list(record.headers)) is not None:
        return None
    try:
        return decode("Command" if command else "Alert", record.value,
                      writer_version_from_headers(list(record.headers)))
    except DecodeError:
        return None


def read_published(reader, topics: Iterable[str], commands_topic: str, signing_key=None,
                   count: int = TAIL_RECORDS, timeout: float = 15.0) -> dict[str, list[Mapping]]:
    """The newest `count` records of each partition of `topics`, decoded and kept as the module
    says, by topic (in the order they were read)."""
    found: dict[str, list[Mapping]] = {topic: [] for topic in topics}
    for record in reader.tail(list(found), count, timeout):
        decoded = compute_published_record(record, commands_topic, signing_key)
        if decoded is not None:
            found[record.topic].append(decoded)
    return found
