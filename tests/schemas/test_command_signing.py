"""Signed commands (issue 18, `schemas.signing`): a signature verifies only the exact message it
was made for, under the key it was made with; the key never shows; the one-side-only rule."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

from schemas.errors import InvalidConfigError
from schemas.codec import version_headers
from schemas.signing import (
    SIGNATURE_HEADER,
    UNSIGNED,
    SigningKey,
    compute_key_fingerprint,
    compute_signature_problem,
    compute_signed_bytes,
    compute_signed_headers,
    compute_signing_mismatch,
    parse_signing_key,
)

KEY = SigningKey(b"0123456789abcdef" * 4)
OTHER_KEY = SigningKey(b"fedcba9876543210" * 4)
TOPIC = "reassigner.commands"

topics = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)
keys = st.binary(max_size=64)
values = st.binary(min_size=1, max_size=512)
versions = st.sampled_from([b"1", b"2", b"3", b"17"])


def signed(signing_key: SigningKey, topic: str, key: bytes, value: bytes, version: bytes = b"3"):
    return compute_signed_headers(signing_key, topic, key, value, [("schema_version", version)])


@given(topics, keys, values, versions)
def test_a_signed_message_verifies_with_its_key(topic, key, value, version):
    assert compute_signature_problem(KEY, topic, key, value, signed(KEY, topic, key, value, version)) is None


@given(topics, keys, values, st.data())
def test_any_byte_flipped_in_the_value_or_key_fails(topic, key, value, data):
    headers = signed(KEY, topic, key, value)
    index = data.draw(st.integers(0, len(value) - 1))
    flip = data.draw(st.integers(1, 255))
    altered = value[:index] + bytes([value[index] ^ flip]) + value[index + 1:]
    assert "does not match" in compute_signature_problem(KEY, topic, key, altered, headers)
    if key:
        at = data.draw(st.integers(0, len(key) - 1))
        other_key = key[:at] + bytes([key[at] ^ flip]) + key[at + 1:]
        assert compute_signature_problem(KEY, topic, other_key, value, headers) is not None


@given(topics, keys, values, st.data())
def test_any_byte_flipped_in_the_signature_fails(topic, key, value, data):
    headers = signed(KEY, topic, key, value)
    signature = headers[-1][1]
    index = data.draw(st.integers(0, len(signature) - 1))
    flip = data.draw(st.integers(1, 255))
    altered = signature[:index] + bytes([signature[index] ^ flip]) + signature[index + 1:]
    assert compute_signature_problem(KEY, topic, key, value, [*headers[:-1], (SIGNATURE_HEADER, altered)]) is not None


@given(topics, keys, values)
def test_another_key_another_topic_or_another_version_header_fails(topic, key, value):
    headers = signed(KEY, topic, key, value, b"3")
    assert compute_signature_problem(OTHER_KEY, topic, key, value, headers) is not None
    assert compute_signature_problem(KEY, topic + "x", key, value, headers) is not None
    moved = [("schema_version", b"2"), headers[-1]]
    assert compute_signature_problem(KEY, topic, key, value, moved) is not None
    # A second version header (the last one wins for the decoder) is not signed either.
    assert compute_signature_problem(KEY, topic, key, value, [*headers, ("schema_version", b"2")]) is not None


@given(keys, values, st.data())
def test_bytes_shifted_between_the_key_and_the_value_fail(key, value, data):
    """The length prefixes keep the parts apart: key+value split elsewhere is another message."""
    whole = key + value
    cut = data.draw(st.integers(0, len(whole)).filter(lambda c: c != len(key)))
    headers = signed(KEY, TOPIC, key, value)
    assert compute_signature_problem(KEY, TOPIC, whole[:cut], whole[cut:], headers) is not None


def test_a_missing_a_repeated_or_a_foreign_signature_header_is_named():
    value = b"\x06\x00command"
    headers = version_headers()
    assert "no reassigner-signature header" in compute_signature_problem(KEY, TOPIC, b"k", value, headers)
    good = signed(KEY, TOPIC, b"k", value)
    assert "2 reassigner-signature headers" in compute_signature_problem(KEY, TOPIC, b"k", value,
                                                                         [*good, good[-1]])
    sha1 = [*headers, (SIGNATURE_HEADER, b"hmac-sha1:abcd")]
    assert "not `hmac-sha256:<hex>`" in compute_signature_problem(KEY, TOPIC, b"k", value, sha1)
    assert compute_signature_problem(KEY, TOPIC, b"k", value, [*headers, (SIGNATURE_HEADER, None)]) is not None
    # Headers as a mapping (as a dead letter keeps them) verify the same way.
    assert compute_signature_problem(KEY, TOPIC, b"k", value, dict(good)) is None


def test_the_canonical_form_is_stable():
    """Pinned: a pipeline and an executor of different releases must agree on these bytes."""
    assert compute_signed_bytes("t", b"k", b"value", b"3") == (
        b"reassigner-command-v1\n" + b"\x00" * 7 + b"\x01t" + b"\x00" * 7 + b"\x01k"
        + b"\x00" * 7 + b"\x013" + b"\x00" * 7 + b"\x05value")
    assert compute_signed_bytes("t", None, b"v", None) == compute_signed_bytes("t", b"", b"v", b"")
    secret = b"0123456789abcdef" * 4
    expected = hmac.new(secret, compute_signed_bytes(TOPIC, b"k", b"v", b"3"), hashlib.sha256).hexdigest()
    assert signed(SigningKey(secret), TOPIC, b"k", b"v")[-1] == (SIGNATURE_HEADER, f"hmac-sha256:{expected}".encode())
    # str and bytes of the same text sign the same (headers arrive as bytes, keys may be str)
    assert signed(KEY, TOPIC, "k", b"v") == signed(KEY, TOPIC, b"k", b"v")


def test_the_key_never_shows_and_its_fingerprint_tells_keys_apart():
    secret = b"s3cr3t-" * 8
    key = SigningKey(secret)
    for shown in (repr(key), str(key), f"{key}", repr([key]), repr({"key": key})):
        assert "s3cr3t" not in shown and key.fingerprint in shown
    assert not hasattr(key, "__dict__")
    assert key.fingerprint == compute_key_fingerprint(secret) != compute_key_fingerprint(secret + b"x")
    assert len(key.fingerprint) == 16


def test_a_key_file_is_stripped_and_must_hold_32_bytes():
    hex_key = b"ab" * 32
    assert parse_signing_key(hex_key + b"\n", "key").fingerprint == SigningKey(hex_key).fingerprint
    with pytest.raises(InvalidConfigError) as refused:
        parse_signing_key(b"  short-secret-value\n", "/etc/reassigner/key")
    message = str(refused.value)
    assert "holds 18 bytes" in message and "openssl rand -hex 32 > /etc/reassigner/key" in message
    assert "short-secret-value" not in message


@pytest.mark.parametrize(("role", "own", "other", "level", "words"), [
    ("executor", UNSIGNED, "aaaa", "error", "would apply unsigned, forged commands"),
    ("executor", "bbbb", "aaaa", "warning", "another command signing key"),
    ("executor", "aaaa", UNSIGNED, "warning", "signs nothing"),
    ("pipeline", "aaaa", UNSIGNED, "warning", "verifies no signatures"),
    ("pipeline", UNSIGNED, "aaaa", "warning", "will refuse every command"),
    ("pipeline", "aaaa", "bbbb", "warning", "another command signing key"),
])
def test_a_key_on_one_side_only_is_named_in_one_line(role, own, other, level, words):
    found = compute_signing_mismatch(role, own, other)
    assert found is not None and found[0] == level and words in found[1] and "\n" not in found[1]


@pytest.mark.parametrize(("role", "own", "other"), [
    ("executor", "aaaa", "aaaa"), ("executor", UNSIGNED, UNSIGNED), ("executor", "aaaa", None),
    ("executor", UNSIGNED, None), ("pipeline", "aaaa", None), ("pipeline", UNSIGNED, UNSIGNED),
])
def test_matching_or_not_yet_announced_signing_is_no_news(role, own, other):
    assert compute_signing_mismatch(role, own, other) is None


@hypothesis_settings(max_examples=50)
@given(st.binary(min_size=32, max_size=64), st.binary(min_size=32, max_size=64))
def test_different_keys_have_different_fingerprints(first, second):
    assert (SigningKey(first).fingerprint == SigningKey(second).fingerprint) == (first == second)
