"""`--command-config`: a Kafka client properties file, as Kafka's own tools take it, turned into
the configuration of each client library the product uses.

One Java-style properties file (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.*``) is translated three ways, by pure functions:

- librdkafka (confluent-kafka producer, consumer, admin): ``sasl.mechanism`` →
  ``sasl.mechanisms``; the user name and password are read out of a ``PlainLoginModule`` or
  ``ScramLoginModule`` JAAS line into ``sasl.username`` / ``sasl.password``; PEM files
  (``ssl.ca.location``, a truststore of type PEM) are passed as paths; a PKCS#12 keystore is
  passed as is (librdkafka reads it);
- kafka-python (the Admin API adapter): ``security_protocol``, ``sasl_mechanism``,
  ``sasl_plain_username``, ``sasl_plain_password``, ``ssl_cafile``, ``ssl_certfile``, ...;
- the Java client (Spark's Kafka source and sink, with the ``kafka.`` prefix): the file's
  Java properties verbatim, plus the Java spelling of what was given in librdkafka's:
  ``ssl.ca.location`` → a PEM truststore (``ssl.truststore.type=PEM``), a client certificate and
  key given as two PEM paths → an inline PEM keystore (``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key``, their contents), ``sasl.username``/``sasl.password`` → a JAAS line,
  ``ssl.endpoint.identification.algorithm=none`` → empty. Keys only librdkafka knows are left out.

One file that works for all three unchanged: ``ssl.truststore.type=PEM`` with
``ssl.truststore.location=ca.pem`` (and, for mTLS, ``ssl.keystore.type=PEM`` with
``ssl.keystore.location`` naming one file that holds the PKCS#8 key and the certificate chain).
A JKS or PKCS#12 truststore is fine for Java; the Python clients then need ``ssl.ca.location``
beside it.

INVARIANTS
- Nothing here reads the environment or a clock; only `read_command_config` reads files (the
  properties file, and checks that the files it names can be read) and registers the file's
  secrets with `schemas.redaction`.
- A setting the Python clients cannot honour (a JKS truststore or keystore, a JAAS login module
  they do not implement) raises `InvalidConfigError` saying what to give instead — never a
  silently weaker connection.
- A property with no meaning for a Python client (``ssl.truststore.type``, ``ssl.protocol``...)
  is listed in `ClientConfig.ignored`, so that the caller can say so once in the log.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from schemas.errors import InvalidConfigError
from schemas.redaction import register_secret

JAAS_LOGIN_MODULES_WITH_PASSWORD = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}

# Properties whose name and meaning are the same in Java and in librdkafka.
SHARED_LIBRDKAFKA_NAMES = frozenset({
    "security.protocol", "client.id", "sasl.kerberos.service.name",
    "sasl.kerberos.principal", "sasl.kerberos.keytab", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.cipher.suites", "ssl.crl.location", "ssl.ca.certificate.stores",
})

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


@dataclass(frozen=True)
class ClientConfig:
    """The one properties file as each client library wants it."""

    properties: Mapping[str, str] = field(default_factory=dict)
    """The file's key/value pairs, as read."""
    librdkafka: Mapping[str, str] = field(default_factory=dict)
    """Extra configuration for confluent-kafka clients (merge into their config dict)."""
    kafka_python: Mapping[str, object] = field(default_factory=dict)
    """Extra keyword arguments for kafka-python clients."""
    java: Mapping[str, str] = field(default_factory=dict)
    """The properties as the Java client (inside Spark) reads them."""
    spark_options: Mapping[str, str] = field(default_factory=dict)
    """Options for Spark's Kafka source/sink (``kafka.``-prefixed `java`)."""
    ignored: tuple[str, ...] = ()
    """Properties the Python clients do not use (Spark still gets them)."""

    def __repr__(self) -> str:
        # The mappings hold passwords (sasl.jaas.config, sasl.password, ssl.key.password...):
        # a log line or a traceback showing a ClientConfig shows the property names only.
        return (f"ClientConfig(properties={sorted(self.properties)}, librdkafka={sorted(self.librdkafka)}, "
                f"kafka_python={sorted(self.kafka_python)}, ignored={self.ignored})")


# --- parsing ------------------------------------------------------------------------------------


def parse_properties(text: str, source: str = "command config") -> dict[str, str]:
    """Java `.properties` syntax, exactly as `java.util.Properties.load` reads it: `key=value`,
    `key: value` or `key value`; `#` and `!` comments; a trailing backslash continues the line;
    `\\n`, `\\t`, `\\=`, `\\:`, `\\\\` and `\\uXXXX` escapes. Checked against Java 17's own
    `Properties.load` on 80,000 generated texts (backslashes, separators, comment marks, every
    line end, `\\u` escapes whole and malformed, characters beyond ASCII): the same properties or
    the same refusal every time, but for an empty property name, which Java takes and this
    refuses (a line starting with `=` is a mistake, never a setting)."""
    logical_lines = _java_logical_lines(text)

    properties: dict[str, str] = {}
    for line in logical_lines:
        key, value = _split_key_value(line, source)
        if not key:
            # (not shown: the line may hold a password)
            raise InvalidConfigError(f"{source}: a line has no property name (it starts with '=' or ':', "
                                     "or the file ends with a lone backslash)")
        properties[key] = value
    return properties


def _java_logical_lines(text: str) -> list[str]:
    """The logical lines of `text` as `java.util.Properties.LineReader` (JDK 17) reads them, line by
    line of its code: lines end at \n, \r or \r\n only (str.splitlines would also split at \x85,
    \x0b, \u2028... inside a password); ' ', \t and \f are skipped before a line and after a
    continuation; blank lines are skipped; `#` or `!` starts a comment where nothing of the logical
    line has been read yet (after a lone backslash too); an odd number of trailing backslashes
    continues the line. At the end of the text a trailing backslash is dropped and what was read is
    a line, even an empty one (`k=v` then a lone backslash is a property named "", which
    `parse_properties` refuses), except after a final \r\n (LineReader has then moved past it)."""
    lines: list[str] = []
    line: list[str] = []
    skip_white_space, appended_line_begin, preceding_backslash, skip_lf = True, False, False, False
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        index += 1
        if skip_lf:
            skip_lf = False
            if char == "\n":
                continue
        if skip_white_space:
            if char in " \t\f" or (not appended_line_begin and char in "\r\n"):
                continue
            skip_white_space = appended_line_begin = False
        if not line and char in "#!":  # a comment: up to the line end
            while index < length and text[index] not in "\r\n":
                index += 1
            index += 1
            skip_white_space = True
            continue
        if char not in "\r\n":
            line.append(char)
            preceding_backslash = not preceding_backslash if char == "\\" else False
            continue
        if not line:  # a blank line
            skip_white_space = True
            continue
        if index >= length:  # the text ends with this line end
            break
        if preceding_backslash:  # a continuation: the backslash is not part of the line
            line.pop()
            skip_white_space = appended_line_begin = True
            preceding_backslash = False
            skip_lf = char == "\r"
            continue
        lines.append("".join(line))
        line = []
        skip_white_space, appended_line_begin, preceding_backslash, skip_lf = True, False, False, False
    if line:
        lines.append("".join(line[:-1] if preceding_backslash else line))
    return lines


def _split_key_value(line: str, source: str) -> tuple[str, str]:
    index, length = 0, len(line)
    while index < length:
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key, source), _unescape(rest, source)


_LINE_END = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _unescape(text: str, source: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            if following == "u":
                digits = text[index + 2:index + 6]
                if len(digits) < 4 or not set(digits) <= _HEX_DIGITS:
                    # Java's Properties.load refuses it too ("Malformed \uxxxx encoding")
                    raise InvalidConfigError(f"{source}: a malformed \\uxxxx escape (\\u must be followed "
                                             "by 4 hexadecimal digits; write \\\\ for a backslash)")
                out.append(chr(int(digits, 16)))
                index += 6
                continue
            out.append(_ESCAPES.get(following, following))
            index += 2
            continue
        out.append(char)
        index += 1
    text = "".join(out)
    if any("\ud800" <= char <= "\udfff" for char in text):  # \\u escapes of a UTF-16 pair, as Java
        text = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")
    return text


def render_properties(properties: Mapping[str, str]) -> str:
    """Java `.properties` text that `parse_properties` (and Java) reads back as `properties`."""
    def escape(text: str, is_key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        out = out.replace("\t", "\\t").replace("\f", "\\f")
        if is_key:
            out = "".join("\\" + char if char in "=: #!" else char for char in out)
        elif out[:1] == " ":
            out = "\\" + out
        # Java's Properties.load reads ISO-8859-1: anything beyond ASCII goes as \\uXXXX.
        return "".join(char if 0x20 <= ord(char) < 0x7f else
                       "".join(f"\\u{unit:04x}" for unit in _utf16_units(char)) for char in out)

    return "".join(f"{escape(key, True)}={escape(value, False)}\n" for key, value in properties.items())


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[i:i + 2], "big") for i in range(0, len(encoded), 2)]


def read_command_config(path: Path | None) -> ClientConfig:
    """The translated client configuration of the properties file at `path` (None: no file).
    The files it names are checked here, before any client is made (`require_client_files`), and
    its secrets registered with `schemas.redaction`, so that no output shows them."""
    if path is None:
        return ClientConfig()
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidConfigError(
            f"cannot read --command-config {path}: {error.strerror or error}; "
            "give the path of a Kafka client properties file"
        ) from None
    properties = parse_properties(text, str(path))
    for key, value in properties.items():
        if key in SECRET_PROPERTIES:
            register_secret(value.strip())
    require_client_files({key.strip(): value for key, value in properties.items()}, str(path))
    pem_files: dict[str, str] = {}
    if "ssl.keystore.location" not in properties:
        # A client certificate given as two PEM paths reaches Java as their contents.
        for name in ("ssl.certificate.location", "ssl.key.location"):
            if name in properties:
                location = properties[name].strip()
                try:
                    pem_files[location] = Path(location).read_text()
                except OSError as error:
                    raise InvalidConfigError(
                        f"{path}: {name}={location} cannot be read: {error.strerror or error}"
                    ) from None
    config = compute_client_config(properties, str(path), pem_files)
    register_secret(config.librdkafka.get("sasl.password"))
    return config


# Properties whose value is a secret (sasl.jaas.config's password is registered once parsed).
SECRET_PROPERTIES = frozenset({
    "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "sasl.password", "sasl.oauthbearer.client.secret",
})

# Properties naming a file a client reads.
FILE_PROPERTIES = ("ssl.ca.location", "ssl.truststore.location", "ssl.keystore.location",
                   "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
                   "sasl.kerberos.keytab")


def require_client_files(properties: Mapping[str, str], source: str) -> None:
    """Refuse, in one line naming the property and the path, a file property whose file this host
    cannot read: checked at start, not found by a client library minutes later in a traceback
    (librdkafka's `ssl.ca.location` also takes the word `probe`: the system's CA store)."""
    for name in FILE_PROPERTIES:
        value = properties.get(name, "").strip()
        if not value or (name == "ssl.ca.location" and value == "probe"):
            continue
        file = Path(value)
        if not file.exists():
            problem = "no such file"
        elif not file.is_file():
            problem = "not a file"
        elif not os.access(file, os.R_OK):
            problem = "not readable by this user"
        else:
            continue
        raise InvalidConfigError(f"{source}: {name}={value}: {problem}; give the path of a file this host "
                                 "can read")


# --- sasl.jaas.config, read as Kafka's Java client reads it --------------------------------------
#
# Java reads the value in two steps, and both take backslashes:
# 1. `java.util.Properties.load` (`parse_properties` above): `\\` → `\`, `\t` `\n` `\r` `\f`,
#    `\uXXXX`, and any other `\c` → `c` (the backslash is dropped);
# 2. Kafka's `org.apache.kafka.common.security.JaasConfig` (kafka-clients 3.9, which Spark 4.0's
#    connector runs, and 4.1, the local stack's) splits the result with a `java.io.StreamTokenizer`
#    in its default syntax plus `-`, `_` and `$` as word characters: characters 0-32 are blanks;
#    a word starts with a letter, `_`, `$`, a character 160-255 or any from 256 up, and goes on
#    through those, digits, `.` and `-`; a token starting with a digit or `.` (or `-` and then
#    one) is a number, which has no text, so Java refuses it as a value ("Value not specified
#    for key"); `"` and `'` are quotes; `/` starts a comment (`//` and `/* */` too); every other
#    character (`;`, `=`, `#`, `\`, `*`...) is a token of its own. A quoted string ends at its
#    quote or at a line end, and takes the escapes `\a \b \f \n \r \t \v`, octal `\0`-`\377`, and
#    `\c` → `c` for any other `c`: so `\\` is one backslash, `\"` a quote.
#    Then: `<module> <flag> (<key>=<value>)* ;` per login module, the flag one of
#    required/requisite/sufficient/optional in any case, and Kafka takes exactly one module.
# `_tokenize_jaas` and `parse_jaas_config` are that tokenizer and that grammar, so the Python
# clients get the password Java gets (a password with a backslash used to reach them with the
# backslash still in it, while Java had read an escape), and refuse what Java refuses.

_JAAS_WHITESPACE, _JAAS_DIGIT, _JAAS_ALPHA, _JAAS_QUOTE, _JAAS_COMMENT = 1, 2, 4, 8, 16
_JAAS_EOF = "EOF"
_JAAS_QUOTE_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _jaas_char_type(char: str | None) -> int:
    """StreamTokenizer's character type (None, the end of the text, reads as a blank)."""
    if char is None:
        return _JAAS_WHITESPACE
    code = ord(char)
    if code >= 160 or (char.isascii() and char.isalpha()) or char in "_$":
        return _JAAS_ALPHA
    if code <= 32:
        return _JAAS_WHITESPACE
    if char == "-":
        return _JAAS_ALPHA | _JAAS_DIGIT
    if "0" <= char <= "9" or char == ".":
        return _JAAS_DIGIT
    if char in "\"'":
        return _JAAS_QUOTE
    if char == "/":
        return _JAAS_COMMENT
    return 0


def _tokenize_jaas(text: str) -> list[tuple[str, str | None]]:
    """(kind, value) tokens as Kafka's StreamTokenizer gives them: ("word", w), ('"' or "'",
    the unescaped string), ("number", None), (";", "=" or another ordinary character, None);
    then ("EOF", None)."""
    tokens: list[tuple[str, str | None]] = []
    length, index = len(text), 0

    def at(position: int) -> str | None:
        return text[position] if position < length else None

    while True:
        while index < length and _jaas_char_type(text[index]) & _JAAS_WHITESPACE:
            index += 1
        if index >= length:
            tokens.append((_JAAS_EOF, None))
            return tokens
        char = text[index]
        kind = _jaas_char_type(char)
        if kind & _JAAS_DIGIT:
            if char == "-" and not (at(index + 1) == "." or "0" <= (at(index + 1) or "") <= "9"):
                tokens.append(("-", None))  # a lone '-' is a character token
                index += 1
                continue
            index += 1 if char == "-" else 0
            seen_dot = False
            while at(index) is not None and ("0" <= at(index) <= "9" or (at(index) == "." and not seen_dot)):
                seen_dot = seen_dot or at(index) == "."
                index += 1
            tokens.append(("number", None))
        elif kind & _JAAS_ALPHA:
            start = index
            index += 1
            while _jaas_char_type(at(index)) & (_JAAS_ALPHA | _JAAS_DIGIT):
                index += 1
            tokens.append(("word", text[start:index]))
        elif kind == _JAAS_QUOTE:
            out: list[str] = []
            index += 1
            while index < length and text[index] not in (char, "\n", "\r"):
                if text[index] != "\\":
                    out.append(text[index])
                    index += 1
                    continue
                escaped = at(index + 1)
                index += 2
                if escaped is None:  # a backslash at the very end: Java keeps (char) -1
                    out.append("\uffff")
                elif "0" <= escaped <= "7":
                    value = int(escaped)
                    if at(index) is not None and "0" <= at(index) <= "7":
                        value = value * 8 + int(at(index))
                        index += 1
                        if escaped <= "3" and at(index) is not None and "0" <= at(index) <= "7":
                            value = value * 8 + int(at(index))
                            index += 1
                    out.append(chr(value))
                else:
                    out.append(_JAAS_QUOTE_ESCAPES.get(escaped, escaped))
            if index < length and text[index] == char:
                index += 1  # the closing quote; a line end is read again as a blank
            tokens.append((char, "".join(out)))
        elif kind == _JAAS_COMMENT:
            following = at(index + 1)
            if following == "*":  # /* ... */, as StreamTokenizer scans it
                index += 2
                previous = ""
                while True:
                    current = at(index)
                    index += 1
                    if current == "/" and previous == "*":
                        break
                    if current in ("\r", "\n"):
                        if current == "\r" and at(index) == "\n":
                            index += 1
                        current = at(index)
                        index += 1
                    if current is None:
                        tokens.append((_JAAS_EOF, None))
                        return tokens
                    previous = current
            else:  # '//' or a lone '/': a comment to the end of the line. As in Java, the
                # character after the '/' is taken even when it is a line end (the comment then
                # runs to the end of the next line).
                index += 2
                while index < length and text[index] not in "\r\n":
                    index += 1
        else:
            tokens.append((char, None))
            index += 1


def parse_jaas_config(line: str, source: str = "command config") -> tuple[str, dict[str, str]]:
    """(login module class, options) of one `sasl.jaas.config` value, read exactly as Kafka's
    Java client reads it (see above); what Java refuses is an `InvalidConfigError` naming the
    key, never a value (a value may be a password)."""

    def refuse(reason: str) -> InvalidConfigError:
        return InvalidConfigError(f"{source}: sasl.jaas.config: {reason}; expected "
                                  "'<LoginModule> required key=\"value\" ...;'")

    tokens = _tokenize_jaas(line)
    position = 0
    entries: list[tuple[str, dict[str, str]]] = []
    while tokens[position][0] != _JAAS_EOF:
        module = tokens[position][1]
        position += 1
        if tokens[position][0] == _JAAS_EOF:
            raise refuse("login module control flag not specified")
        flag = tokens[position][1]
        if flag is None or flag.upper() not in ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"):
            raise refuse("invalid or missing login module control flag")
        position += 1
        options: dict[str, str] = {}
        while tokens[position][0] not in (_JAAS_EOF, ";"):
            key = tokens[position][1]
            if tokens[position + 1][0] != "=" or tokens[position + 2][1] is None:
                raise refuse(f"value not specified for key {key!r}")
            if key is not None:  # Java would keep a null key; no client reads one
                options[key] = str(tokens[position + 2][1])
            position += 3
        if tokens[position][0] != ";":
            raise refuse("entry not terminated by a semicolon")
        position += 1
        if not module:
            raise refuse("login module not specified")
        entries.append((module, options))
    if len(entries) != 1:
        raise refuse(f"{len(entries)} login modules; Kafka takes exactly one")
    return entries[0]


# --- translation --------------------------------------------------------------------------------


def compute_client_config(properties: Mapping[str, str], source: str = "command config",
                          pem_files: Mapping[str, str] | None = None) -> ClientConfig:
    """Translate Java client properties for librdkafka, kafka-python and Spark (see module doc);
    `pem_files` holds the contents of a client certificate and key given as PEM paths."""
    props = {key.strip(): value.strip() for key, value in properties.items()}
    librdkafka: dict[str, str] = {}
    kafka_python: dict[str, object] = {}
    handled: set[str] = set()

    protocol = props.get("security.protocol")
    if protocol is not None:
        protocol = protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"{source}: security.protocol={props['security.protocol']!r}; "
                f"expected one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        librdkafka["security.protocol"] = protocol
        kafka_python["security_protocol"] = protocol
        handled.add("security.protocol")

    if "sasl.mechanisms" in props and "sasl.mechanism" not in props:  # librdkafka's spelling
        props["sasl.mechanism"] = props.pop("sasl.mechanisms")
    _translate_sasl(props, source, librdkafka, kafka_python, handled)
    _translate_ssl(props, source, librdkafka, kafka_python, handled)

    if "client.id" in props:
        librdkafka["client.id"] = props["client.id"]
        kafka_python["client_id"] = props["client.id"]
        handled.add("client.id")
    for name in sorted(SHARED_LIBRDKAFKA_NAMES - handled):
        if name in props:
            librdkafka[name] = props[name]
            handled.add(name)

    java = compute_java_properties(props, source, pem_files or {})
    spark_options = {f"kafka.{key}": value for key, value in java.items()}
    ignored = tuple(sorted(set(props) - handled))
    return ClientConfig(properties=dict(props), librdkafka=librdkafka, kafka_python=kafka_python,
                        java=java, spark_options=spark_options, ignored=ignored)


# Properties that only librdkafka reads; the Java client gets their Java spelling instead.
LIBRDKAFKA_ONLY_NAMES = frozenset({
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
    "ssl.ca.certificate.stores", "sasl.username", "sasl.password", "sasl.mechanisms",
})


def compute_java_properties(props: Mapping[str, str], source: str,
                            pem_files: Mapping[str, str]) -> dict[str, str]:
    """The properties as the Java client must get them (see the module doc)."""
    java = {key: value for key, value in props.items() if key not in LIBRDKAFKA_ONLY_NAMES}
    if "ssl.ca.location" in props and "ssl.truststore.location" not in props:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = props["ssl.ca.location"]
    certificate, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if certificate is not None and "ssl.keystore.location" not in props:
        if key is None:
            raise InvalidConfigError(f"{source}: ssl.certificate.location is given without "
                                     "ssl.key.location; give the client certificate's key too")
        key_text = pem_files.get(key)
        if key_text is not None and "-----BEGIN PRIVATE KEY-----" not in key_text \
                and "-----BEGIN ENCRYPTED PRIVATE KEY-----" not in key_text:
            raise InvalidConfigError(
                f"{source}: ssl.key.location={key} is not a PKCS#8 key, which the Java client "
                f"(Spark) needs; convert it: openssl pkcs8 -topk8 -nocrypt -in {key} -out key-pkcs8.pem"
            )
        if certificate in pem_files and key_text is not None:
            java["ssl.keystore.type"] = "PEM"
            java["ssl.keystore.certificate.chain"] = pem_files[certificate]
            java["ssl.keystore.key"] = key_text
    if "sasl.username" in props and "sasl.jaas.config" not in props:
        mechanism = props.get("sasl.mechanism", "PLAIN").upper()
        module = next((m for m, family in JAAS_LOGIN_MODULES_WITH_PASSWORD.items()
                       if mechanism.startswith(family)), None)
        if module is not None:
            java["sasl.jaas.config"] = (f'{module} required username="{_jaas_quote(props["sasl.username"])}" '
                                        f'password="{_jaas_quote(props.get("sasl.password", ""))}";')
    if "sasl.mechanism" in props:
        java["sasl.mechanism"] = props["sasl.mechanism"].upper()
    if props.get("ssl.endpoint.identification.algorithm", "").strip().lower() == "none":
        java["ssl.endpoint.identification.algorithm"] = ""  # Java's spelling of "no host check"
    return java


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _translate_sasl(props: Mapping[str, str], source: str, librdkafka: dict[str, str],
                    kafka_python: dict[str, object], handled: set[str]) -> None:
    mechanism = props.get("sasl.mechanism")
    if mechanism is not None:
        mechanism = mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise InvalidConfigError(
                f"{source}: sasl.mechanism={props['sasl.mechanism']!r}; "
                f"expected one of {', '.join(SASL_MECHANISMS)}"
            )
        librdkafka["sasl.mechanisms"] = mechanism
        kafka_python["sasl_mechanism"] = mechanism
        handled.add("sasl.mechanism")
    if "sasl.kerberos.service.name" in props:
        kafka_python["sasl_kerberos_service_name"] = props["sasl.kerberos.service.name"]

    jaas = props.get("sasl.jaas.config")
    if jaas is None:
        if "sasl.username" in props:  # librdkafka's spelling of a user and password
            handled.update({"sasl.username", "sasl.password"})
            librdkafka["sasl.username"] = props["sasl.username"]
            librdkafka["sasl.password"] = props.get("sasl.password", "")
            kafka_python["sasl_plain_username"] = props["sasl.username"]
            kafka_python["sasl_plain_password"] = props.get("sasl.password", "")
        return
    handled.add("sasl.jaas.config")
    module, options = parse_jaas_config(jaas, source)
    family = JAAS_LOGIN_MODULES_WITH_PASSWORD.get(module)
    if family is None:
        if module.endswith("Krb5LoginModule"):
            # librdkafka and kafka-python take Kerberos from the system (kinit / keytab options).
            if "principal" in options:
                librdkafka["sasl.kerberos.principal"] = options["principal"]
            if "keyTab" in options:
                librdkafka["sasl.kerberos.keytab"] = options["keyTab"]
            return
        raise InvalidConfigError(
            f"{source}: sasl.jaas.config uses {module}, which the Python clients cannot run; "
            "use PlainLoginModule or ScramLoginModule with username and password"
        )
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise InvalidConfigError(
            f"{source}: sasl.jaas.config ({module.rsplit('.', 1)[-1]}) lacks {' and '.join(missing)}"
        )
    if mechanism is not None and not mechanism.startswith(family):
        raise InvalidConfigError(
            f"{source}: sasl.mechanism={mechanism} does not match the JAAS login module "
            f"{module.rsplit('.', 1)[-1]} (expected a {family} mechanism)"
        )
    if mechanism is None:  # Java's default mechanism is GSSAPI; a password module means PLAIN/SCRAM
        default = "PLAIN" if family == "PLAIN" else "SCRAM-SHA-512"
        librdkafka["sasl.mechanisms"] = default
        kafka_python["sasl_mechanism"] = default
    librdkafka["sasl.username"] = options["username"]
    librdkafka["sasl.password"] = options["password"]
    kafka_python["sasl_plain_username"] = options["username"]
    kafka_python["sasl_plain_password"] = options["password"]


def _is_pem_store(props: Mapping[str, str], prefix: str) -> bool:
    store_type = props.get(f"{prefix}.type", "").upper()
    location = props.get(f"{prefix}.location", "").lower()
    if store_type:
        return store_type == "PEM"
    return location.endswith((".pem", ".crt", ".cer"))


def _translate_ssl(props: Mapping[str, str], source: str, librdkafka: dict[str, str],
                   kafka_python: dict[str, object], handled: set[str]) -> None:
    ca_location = props.get("ssl.ca.location")
    if "ssl.truststore.location" in props:
        handled.update({"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password"})
        if not _is_pem_store(props, "ssl.truststore") and ca_location is None:
            raise InvalidConfigError(
                f"{source}: ssl.truststore.location={props['ssl.truststore.location']} is a "
                f"{props.get('ssl.truststore.type', 'JKS')} truststore, which librdkafka and "
                "kafka-python cannot read; export the CA certificate as PEM (keytool -exportcert "
                "-rfc) and give ssl.ca.location=/path/ca.pem beside it (Spark keeps using the "
                "truststore), or use ssl.truststore.type=PEM with the PEM file for all three"
            )
        if _is_pem_store(props, "ssl.truststore"):
            ca_location = ca_location or props["ssl.truststore.location"]
    if ca_location is not None:
        librdkafka["ssl.ca.location"] = ca_location
        kafka_python["ssl_cafile"] = ca_location
        handled.add("ssl.ca.location")

    if "ssl.keystore.location" in props:
        handled.update({"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password"})
        location = props["ssl.keystore.location"]
        store_type = props.get("ssl.keystore.type", "JKS").upper()
        if store_type == "PEM":
            # One file with the PKCS#8 key and the chain; OpenSSL finds each part in it.
            librdkafka["ssl.certificate.location"] = location
            librdkafka["ssl.key.location"] = location
            kafka_python["ssl_certfile"] = location
            kafka_python["ssl_keyfile"] = location
            if "ssl.key.password" in props:
                librdkafka["ssl.key.password"] = props["ssl.key.password"]
                kafka_python["ssl_password"] = props["ssl.key.password"]
        elif "ssl.certificate.location" not in props:
            # librdkafka could read a PKCS12 keystore, but kafka-python (the Admin API client)
            # reads PEM only, and one file must serve both.
            raise InvalidConfigError(
                f"{source}: ssl.keystore.location={location} is a {store_type} keystore, which "
                "the Python clients cannot read; give the client certificate and key as PEM: "
                "ssl.certificate.location and ssl.key.location (Spark keeps using the keystore)"
            )
    if "ssl.certificate.location" in props:
        kafka_python["ssl_certfile"] = props["ssl.certificate.location"]
    if "ssl.key.location" in props:
        kafka_python["ssl_keyfile"] = props["ssl.key.location"]
    if "ssl.key.password" in props:
        kafka_python["ssl_password"] = props["ssl.key.password"]
    if "ssl.crl.location" in props:
        kafka_python["ssl_crlfile"] = props["ssl.crl.location"]

    if "ssl.endpoint.identification.algorithm" in props:
        handled.add("ssl.endpoint.identification.algorithm")
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        # Java: empty disables host name checks; librdkafka spells that "none".
        librdkafka["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else "none"
        kafka_python["ssl_check_hostname"] = algorithm == "https"
