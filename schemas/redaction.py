"""No secret in any output: `redact(text)` is the one function every text the product prints,
logs, serves or raises goes through.

What it masks, in this order:

1. the password of a URL's user info (`redis://user:secret@host` → `redis://user:***@host`,
   also `rediss+cluster://:secret@host` and an `http://user:token@hook` of the webhook);
2. the value of a key that names a secret, in the forms the product's texts take: JAAS options
   (`password="..."`), properties lines (`ssl.key.password=...`), Python reprs and JSON
   (`'sasl.password': '...'`, `"ssl_password": "..."`), query strings (`?token=...`); the keys
   are those containing `password`, `passwd`, `secret` or `token` (any case);
3. every occurrence of a secret registered with `register_secret` — the doors that read one
   (the Redis URL in `runtime.clients.redis_io`, the `--command-config` file in
   `runtime.clients.client_config`, the status server's token) register it — also escaped as
   a Python repr, as JSON or as a URL would carry it. So a secret is masked wherever a library
   puts it (an exception's text, a traceback), not only in the shapes above. Secrets shorter than
   `MIN_REGISTERED_LENGTH` characters are not registered (masking every "ab" of a text would make
   it unreadable); the shapes of 1 and 2 still mask them.

Where it is applied: `ReassignerError` redacts its message when it is made (so every error of the
product, printed or alerted, is clean), the CLI's error printer and usage errors, the one log
format of every process (`reassigner.cli.options.configure_logging`), the status server's
`state_error` and error bodies. Nothing here does I/O; the registry is the process's one piece of
shared state, written once at start by the doors above.
"""

from __future__ import annotations

import json
import re
import threading
from urllib.parse import quote

MASK = "***"
MIN_REGISTERED_LENGTH = 4

_SECRET_KEY = r"[\w.\-]*(?:password|passwd|secret|token)[\w.\-]*"
# A URL with user info: scheme://user:password@host... The password is everything up to the last
# '@' of the URL (an unencoded '@' in a password is common); the URL ends at a blank or a quote.
_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<rest>[^\s'\"<>]+)")
# key, then what separates it from its value (a closing quote of the key, '=' or ':', blanks).
_KEY_VALUE = re.compile(
    r"(?P<key>(?<![\w.\-])" + _SECRET_KEY + r")(?P<sep>['\"]?\s*[=:]\s*)"
    r"(?:(?P<quote>['\"])(?P<quoted>(?:\\.|(?!(?P=quote)).)*)(?P=quote)|(?P<bare>[^\s,;&)}\]'\"]+))",
    re.IGNORECASE | re.DOTALL)

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def register_secret(secret: str | None) -> None:
    """Mask `secret` in every text `redact` sees from now on (with its escaped forms)."""
    global _secrets
    if not secret or len(secret) < MIN_REGISTERED_LENGTH:
        return
    forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""),
             quote(secret, safe="/:")}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | {form for form in forms if form}, key=len, reverse=True))


def forget_secrets() -> None:
    """Empty the registry (tests)."""
    global _secrets
    with _lock:
        _secrets = ()


def _redact_url(match: re.Match) -> str:
    rest = match["rest"]
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials or "/" in credentials.split(":", 1)[0]:
        return match[0]
    return f"{match['scheme']}{credentials.split(':', 1)[0]}:{MASK}@{host}"


def _redact_value(match: re.Match) -> str:
    if match["quote"] is not None:
        return f"{match['key']}{match['sep']}{match['quote']}{MASK}{match['quote']}"
    return f"{match['key']}{match['sep']}{MASK}"


def redact(text: object) -> str:
    """`text` (made a string) with every secret masked (see the module docstring)."""
    text = str(text)
    if "://" in text:
        text = _URL.sub(_redact_url, text)
    text = _KEY_VALUE.sub(_redact_value, text)
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text
