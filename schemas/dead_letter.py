"""The one builder of `DeadLetter` records: the pipeline's bad inputs, the executor's
undecodable commands and the webhook's undeliverable alerts all go through it.

RULES
- The key and id are `<source topic>-<partition>-<offset>`: deterministic, so a re-processed bad
  message is recognised as the same one.
- A dead letter always fits a Kafka message (the producer refuses one over `message.max.bytes`,
  1 MB by default, and an outbox that can never be published would stop the pipeline for good):
  the value keeps at most `MAX_VALUE_BYTES`, the source key at most `MAX_KEY_BYTES`, the headers
  at most `MAX_HEADER_BYTES` in all and the reason at most `MAX_REASON_CHARS`. What was cut is
  said in the reason, with where the whole record still is (its source topic, partition and
  offset, until the topic's retention removes it).
"""

from __future__ import annotations

from typing import Any, Mapping

from schemas.loader import CURRENT_SCHEMA_VERSION

MAX_VALUE_BYTES = 256 * 1024
MAX_KEY_BYTES = 16 * 1024
MAX_HEADER_BYTES = 16 * 1024
MAX_REASON_CHARS = 2000


def build_dead_letter(*, source_topic: str, partition: int, offset: int, value: bytes | None,
                      reason: str, now_ms: int, key: bytes | None = None,
                      headers: Mapping[str, bytes | None] | None = None,
                      expected_schema: str | None = None) -> dict[str, Any]:
    """The DeadLetter record of one input message that could not be used (see the module rules)."""
    letter_key = f"{source_topic}-{partition}-{offset}"
    cut: list[str] = []
    if value is not None and len(value) > MAX_VALUE_BYTES:
        cut.append(f"value cut from {len(value):,} to {MAX_VALUE_BYTES:,} bytes")
        value = value[:MAX_VALUE_BYTES]
    if key is not None and len(key) > MAX_KEY_BYTES:
        cut.append(f"key cut from {len(key):,} to {MAX_KEY_BYTES:,} bytes")
        key = key[:MAX_KEY_BYTES]
    kept_headers: dict[str, bytes] = {}
    budget = MAX_HEADER_BYTES
    for name, header in (headers or {}).items():
        if header is None:
            continue
        size = len(name.encode()) + len(header)
        if size > budget:
            cut.append(f"header {name[:40]!r} left out")
            continue
        kept_headers[name] = header
        budget -= size
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[:MAX_REASON_CHARS] + "…"
    if cut:
        reason += f" ({'; '.join(cut)}; the whole record is at {source_topic}[{partition}]@{offset})"
    return {
        "schema_version": CURRENT_SCHEMA_VERSION, "event_time": int(now_ms), "id": letter_key,
        "key": letter_key, "source_topic": source_topic, "source_partition": int(partition),
        "source_offset": int(offset), "source_key": key, "value": value, "headers": kept_headers,
        "expected_schema": expected_schema, "reason": reason,
    }
