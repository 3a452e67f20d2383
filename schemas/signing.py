"""Signed commands: only a holder of the command signing key can issue a command.

Pure functions; the key file is read by `runtime.settings.read_command_signing_key`, the
signature written by the pipeline (`streams.runner.PipelineRunner.publish`) and checked by the
executor (`reassigner.edge.executor`) before anything is claimed or applied.

WHERE THE SIGNATURE LIVES: a Kafka header, `reassigner-signature`, value
`hmac-sha256:<64 lowercase hex digits>` — not a schema field. Why:
- the signature covers the exact bytes on the wire. A field inside the record would have to be
  left out of what it signs, so the signed form would be a re-encoding of the decoded record;
  an executor of a newer schema set decodes an older writer's record with the new fields
  defaulted, and its re-encoding no longer matches the bytes the pipeline signed. Over the raw
  value nothing is re-encoded, and any schema version verifies the same way;
- no schema change: a new field means a new frozen schema set (`schemas.compatibility`) that
  every reader must know; an executor that verifies nothing simply ignores the header;
- the `schema_version` header, which tells the reader how to decode the value, is signed with
  it, so moving a signed value under another version header breaks the signature.

WHAT IS SIGNED (`compute_signed_bytes`): HMAC-SHA256, keyed with the key file's bytes, over
    b"reassigner-command-v1\\n" + field(topic) + field(message key) + field(schema_version
    header) + field(value)
where field(x) is the 8-byte big-endian length of x, then x (a missing key or header is empty).
The lengths keep the parts apart (no shifting bytes from the key into the value); the topic
binds a signature to one commands topic (`<topic_prefix>.commands`). The value carries the
command id, its epoch and its event time, so none of them can be changed either. Give each Kafka
cluster its own key: two clusters whose commands topics have the same name and share a key
would accept each other's commands (their epochs permitting).

Verification (`compute_signature_problem`) uses `hmac.compare_digest`; a message with no
signature header, two of them, another scheme, or a signature that does not match, is refused.

ONE SIDE ONLY (`compute_signing_mismatch`): each process records in the state store, as it
starts, the fingerprint of its key or `unsigned` (`state.controller_store.store_signing_announcement`)
and reads the other's:
- an executor without a key while the pipeline signs: startup error (it would apply any
  unsigned forgery while the operator believes commands are signed);
- every other mismatch is a one-line warning: an executor with a key refuses every unsigned or
  differently signed command anyway (fail closed; each refusal is a `CommandFailed` alert), and
  a pipeline may start before its executor is restarted with the new key.
A fingerprint is an HMAC of a fixed text under the key (`compute_key_fingerprint`): it tells
two keys apart and reveals nothing of the key. The key itself is never printed: `SigningKey`'s
repr shows the fingerprint only.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Iterable, Mapping

from schemas.errors import InvalidConfigError
from schemas.codec import HEADER_SCHEMA_VERSION

SIGNATURE_HEADER = "reassigner-signature"
SCHEME = "hmac-sha256"
DOMAIN = b"reassigner-command-v1\n"
FINGERPRINT_TEXT = b"reassigner command signing key fingerprint v1"
MIN_KEY_BYTES = 32
UNSIGNED = "unsigned"
"""What a process without a key announces in place of a fingerprint."""

Headers = Iterable[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None


class SigningKey:
    """The command signing key. Its bytes never appear in a repr, str, log line or error."""

    __slots__ = ("_secret", "fingerprint")

    def __init__(self, secret: bytes) -> None:
        self._secret = bytes(secret)
        self.fingerprint = compute_key_fingerprint(self._secret)

    def __repr__(self) -> str:
        return f"SigningKey(fingerprint={self.fingerprint})"

    __str__ = __repr__

    def mac(self, data: bytes) -> str:
        return hmac.new(self._secret, data, hashlib.sha256).hexdigest()


def compute_key_fingerprint(secret: bytes) -> str:
    """16 hex digits naming a key without revealing it (an HMAC of a fixed text, never of a
    command: the text does not start with `DOMAIN`)."""
    return hmac.new(secret, FINGERPRINT_TEXT, hashlib.sha256).hexdigest()[:16]


def parse_signing_key(content: bytes, source: str) -> SigningKey:
    """The key held by a key file's `content` (surrounding whitespace dropped, so `openssl rand
    -hex 32 > key` works as it is); at least `MIN_KEY_BYTES` bytes."""
    secret = content.strip()
    if len(secret) < MIN_KEY_BYTES:
        raise InvalidConfigError(
            f"the command signing key file {source} holds {len(secret)} bytes; at least "
            f"{MIN_KEY_BYTES} are needed: make one with `openssl rand -hex 32 > {source}`")
    return SigningKey(secret)


def _field(part: bytes) -> bytes:
    return len(part).to_bytes(8, "big") + part


def _as_bytes(value: bytes | str | None) -> bytes:
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


def _header_values(headers: Headers, name: str) -> list[bytes | str | None]:
    if headers is None:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [value for header, value in items if header == name]


def compute_signed_bytes(topic: str, key: bytes | str | None, value: bytes,
                         schema_version: bytes | str | None) -> bytes:
    """The canonical form a signature covers (module doc, WHAT IS SIGNED)."""
    return (DOMAIN + _field(topic.encode()) + _field(_as_bytes(key)) + _field(_as_bytes(schema_version))
            + _field(bytes(value)))


def _version_header(headers: Headers) -> bytes | str | None:
    values = _header_values(headers, HEADER_SCHEMA_VERSION)
    return values[-1] if values else None  # the last one wins, as `writer_version_from_headers`


def compute_signature(signing_key: SigningKey, topic: str, key: bytes | str | None, value: bytes,
                      headers: Headers) -> bytes:
    """The `reassigner-signature` header value of a message with these headers."""
    signed = compute_signed_bytes(topic, key, value, _version_header(headers))
    return f"{SCHEME}:{signing_key.mac(signed)}".encode("ascii")


def compute_signed_headers(signing_key: SigningKey, topic: str, key: bytes | str | None, value: bytes,
                           headers: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """`headers` with the signature of the message added (the pipeline's side)."""
    return [*headers, (SIGNATURE_HEADER, compute_signature(signing_key, topic, key, value, headers))]


def compute_signature_problem(signing_key: SigningKey, topic: str, key: bytes | str | None,
                              value: bytes, headers: Headers) -> str | None:
    """Why a consumed message is not signed with `signing_key` (the executor's side), or None."""
    found = _header_values(headers, SIGNATURE_HEADER)
    if not found:
        return f"it carries no {SIGNATURE_HEADER} header (unsigned)"
    if len(found) > 1:
        return f"it carries {len(found)} {SIGNATURE_HEADER} headers; a signed command has one"
    given = _as_bytes(found[0])
    if not given.startswith(f"{SCHEME}:".encode()):
        return f"its {SIGNATURE_HEADER} header is not `{SCHEME}:<hex>`"
    expected = compute_signature(signing_key, topic, key, value, headers)
    if not hmac.compare_digest(given, expected):
        return f"its {SIGNATURE_HEADER} does not match the command: signed with another key, or altered"
    return None


def compute_signing_mismatch(role: str, own: str, other: str | None) -> tuple[str, str] | None:
    """The one-side-only rule (module doc) for a process (`role`: "executor" or "pipeline")
    whose own announcement is `own` (a fingerprint or `UNSIGNED`), given the other process's
    (`other`; None when it never announced): ("error" | "warning", one line), or None."""
    if other is None or own == other:
        return None
    peer = "pipeline" if role == "executor" else "executor"
    setting = "command_signing_key_file (REASSIGNER_COMMAND_SIGNING_KEY_FILE)"
    if role == "executor" and own == UNSIGNED:
        return ("error", f"the pipeline signs its commands (key fingerprint {other}) but this executor "
                f"has no {setting}: it would apply unsigned, forged commands; give it the pipeline's key file")
    if own == UNSIGNED:  # the pipeline, unsigned; the executor verifies
        return ("warning", f"the executor verifies command signatures (key fingerprint {other}) but this "
                f"pipeline has no {setting}: the executor will refuse every command; give the pipeline "
                "the executor's key file")
    if other == UNSIGNED:
        if role == "executor":
            return ("warning", "the pipeline announced that it signs nothing: every command will be refused "
                    f"(BAD_SIGNATURE) until it runs with this executor's key (fingerprint {own})")
        return ("warning", f"the executor verifies no signatures: any principal that can write the commands "
                f"topic can still issue commands; give the executor this pipeline's key file ({setting}, "
                f"fingerprint {own}) and restart it")
    return ("warning", f"the {peer} runs with another command signing key (fingerprint {other}, this "
            f"{role}'s is {own}): every command will be refused (BAD_SIGNATURE) until both use the same key file")
