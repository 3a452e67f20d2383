"""`parse_properties` reads a properties file as Java's own `Properties.load` does: the same
properties, or a refusal where Java refuses, on generated texts made of what trips parsers up
(backslashes, separators, comment marks, every line end, `\\u` escapes whole and malformed,
characters beyond ASCII and the BMP). The judge is Java itself: a 30-line program compiled with
the JDK's `javac` (skipped where there is none). Java takes an empty property name; the product
refuses it, so there only a refusal is checked.

Regression: a file ending with a lone backslash gave no property here while Java reads one named
"" (the hand-written parser had skipped an empty continuation); jproperties, weighed as a
replacement, differs from Java on about 1 text in 120 of these (docs/dependencies.md)."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from runtime.clients.java_properties import parse_properties
from schemas.errors import InvalidConfigError

LOAD_ALL = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class LoadAll {
    static String units(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) { if (i > 0) b.append('.'); b.append(Integer.toHexString(s.charAt(i))); }
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.US_ASCII);
             PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[1]), StandardCharsets.US_ASCII))) {
            String line;
            while ((line = in.readLine()) != null) {
                Properties properties = new Properties();
                try {
                    properties.load(new StringReader(new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8)));
                    TreeMap<String, String> sorted = new TreeMap<>();
                    for (String key : properties.stringPropertyNames()) sorted.put(key, properties.getProperty(key));
                    StringBuilder b = new StringBuilder("OK");
                    for (Map.Entry<String, String> e : sorted.entrySet()) b.append(' ').append(units(e.getKey())).append('=').append(units(e.getValue()));
                    out.println(b);
                } catch (IllegalArgumentException malformed) {
                    out.println("ERROR");
                }
            }
        }
    }
}
"""
PIECES = ["\\", "\\", "=", ":", " ", "\t", "\f", "\r", "\n", "\r\n", "#", "!", "u", "0", "a", "F", "x", "é",
          "\x85", "\u2028", "\x0b", "k", "v", "\\u00e9", "\\u", "\U0001f600"]


def utf16_units(text: str) -> str:
    encoded = text.encode("utf-16-be", "surrogatepass")
    return ".".join(format(int.from_bytes(encoded[i:i + 2], "big"), "x") for i in range(0, len(encoded), 2))


def as_java_prints(properties: dict[str, str]) -> str:
    ordered = sorted(properties.items(), key=lambda item: item[0].encode("utf-16-be", "surrogatepass"))
    return "OK" + "".join(f" {utf16_units(key)}={utf16_units(value)}" for key, value in ordered)


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None, reason="no JDK (javac)")
def test_parse_properties_reads_what_java_reads(tmp_path):
    import base64

    (tmp_path / "LoadAll.java").write_text(LOAD_ALL)
    subprocess.run(["javac", "LoadAll.java"], cwd=tmp_path, check=True, timeout=120)
    generator = random.Random(19)
    texts = ["".join(generator.choice(PIECES) for _ in range(generator.randint(1, 16))) for _ in range(10000)]
    texts += ["k=v\n\\", "k=v\n\\\r\n", "\\\n#c=1\nk=v\n", "\\\n\nk=v\n", "#: =x\nk=v\n", "k=\\u 0xa\n"]
    (tmp_path / "in.b64").write_text("".join(base64.b64encode(text.encode("utf-8", "surrogatepass")).decode() + "\n"
                                             for text in texts))
    subprocess.run(["java", "-cp", str(tmp_path), "LoadAll", "in.b64", "out.txt"], cwd=tmp_path, check=True,
                   timeout=120)
    java = (tmp_path / "out.txt").read_text().splitlines()
    assert len(java) == len(texts)
    differences = []
    for text, read_by_java in zip(texts, java):
        try:
            ours = as_java_prints(parse_properties(text))
        except InvalidConfigError as refused:
            if "no property name" in str(refused):  # Java took an empty name: refused here on purpose
                if not (read_by_java == "ERROR" or read_by_java.startswith("OK =") or " =" in read_by_java):
                    differences.append((text, read_by_java, "refused an empty name Java does not see"))
                continue
            ours = "ERROR"
        if ours != read_by_java:
            differences.append((text, read_by_java, ours))
    assert not differences, differences[:5]


@pytest.mark.parametrize("text, expected", [
    ("#: =x\nk=v\n", {"k": "v"}),            # a comment, whatever follows '#' (jproperties: its metadata syntax, refused)
    ("#:: x\nk=v\n", {"k": "v"}),
    ("\\\n#c=1\nk=v\n", {"k": "v"}),         # after a lone backslash, '#' still starts a comment
    ("\\\n\nk=v\n", {"k": "v"}),             # a lone backslash, then a blank line: nothing
    ("k=v\n\\\r\n", {"k": "v"}),             # a final lone backslash before \r\n: nothing
    ("k=a\\\n  #b\n", {"k": "a#b"}),         # a continuation is never a comment once the line has text
])
def test_java_cases_a_properties_library_reads_otherwise(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["k=\\u 0xa\n", "k=\\u\r\n\tF\n", "k=v\n\\"])
def test_what_java_refuses_or_names_nothing_is_refused(text):
    with pytest.raises(InvalidConfigError):
        parse_properties(text)
