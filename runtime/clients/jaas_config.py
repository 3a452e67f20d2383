r"""`sasl.jaas.config` read as Kafka's Java client reads it (pure), so that the Python clients get
the user name and password Java gets, and refuse what Java refuses.

Java reads the value in two steps, and both take backslashes:
1. `java.util.Properties.load` (`runtime.clients.java_properties`): `\\` → `\`, `\t` `\n` `\r`
   `\f`, `\uXXXX`, and any other `\c` → `c` (the backslash is dropped);
2. Kafka's `org.apache.kafka.common.security.JaasConfig` (kafka-clients 3.9, which Spark 4.0's
   connector runs, and 4.1, the local stack's) splits the result with a `java.io.StreamTokenizer`
   in its default syntax plus `-`, `_` and `$` as word characters: characters 0-32 are blanks;
   a word starts with a letter, `_`, `$`, a character 160-255 or any from 256 up, and goes on
   through those, digits, `.` and `-`; a token starting with a digit or `.` (or `-` and then
   one) is a number, which has no text, so Java refuses it as a value ("Value not specified
   for key"); `"` and `'` are quotes; `/` starts a comment (`//` and `/* */` too); every other
   character (`;`, `=`, `#`, `\`, `*`...) is a token of its own. A quoted string ends at its
   quote or at a line end, and takes the escapes `\a \b \f \n \r \t \v`, octal `\0`-`\377`, and
   `\c` → `c` for any other `c`: so `\\` is one backslash, `\"` a quote.
   Then: `<module> <flag> (<key>=<value>)* ;` per login module, the flag one of
   required/requisite/sufficient/optional in any case, and Kafka takes exactly one module.
`_tokenize_jaas` is that tokenizer and `parse_jaas_config` that grammar.

INVARIANTS
- Pure: no I/O, no clock.
- A refusal is an `InvalidConfigError` naming the key, never a value (a value may be a password).
"""

from __future__ import annotations

from schemas.errors import InvalidConfigError

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
    Java client reads it (see the module doc); what Java refuses is an `InvalidConfigError`
    naming the key, never a value (a value may be a password)."""

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
