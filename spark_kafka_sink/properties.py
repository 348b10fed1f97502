"""Reading Java ``.properties`` files: the format Kafka's own tools take their producer settings in.

The jobs (``jobs/*.py``) read ``conf/producer.properties`` with :func:`load_properties`, so a file
written for ``kafka-console-producer.sh --producer.config`` works unchanged. The grammar is
``java.util.Properties.load``'s:

- blank lines, and lines whose first non-blank character is ``#`` or ``!``, are skipped;
- ``key=value``, ``key: value`` and ``key value``: the key ends at the first unescaped ``=``,
  ``:`` or blank; blanks around the separator are dropped;
- a line ending in an odd number of backslashes continues on the next line, whose leading blanks
  are dropped (a comment line never continues);
- escapes: ``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, and ``\\`` before any other character
  stands for that character (``\\=``, ``\\:``, ``\\ ``, ``\\\\``).

Two differences from Java, both to catch mistakes in a settings file rather than carry them into
a job: trailing blanks of a value are dropped (Java keeps them; escape one as ``\\ `` to keep it),
and a key with neither a separator nor a value (``linger.ms`` alone on its line) is an error
(Java reads it as an empty value; write ``linger.ms=`` for that). An empty key and a malformed
``\\uXXXX`` are errors too. Every error is a :class:`PropertiesError` naming the file and line.
A key given twice keeps its last value, as in Java. Files are read as UTF-8.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import PropertiesError

__all__ = ["PropertiesError", "load_properties", "parse_properties"]

_BLANKS = " \t\f"
_SEPARATORS = "=:"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


def load_properties(path: str | Path) -> dict[str, str]:
    """The properties of the file at ``path``, in file order (``OSError`` if it cannot be read,
    :class:`PropertiesError` for a malformed line)."""
    path = Path(path)
    return parse_properties(path.read_text(encoding="utf-8"), source=str(path))


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """The properties in ``text``; ``source`` names it in errors."""
    out: dict[str, str] = {}
    for number, logical in _logical_lines(text):
        key, value = _split(logical, source, number)
        out[key] = value
    return out


def _logical_lines(text: str):
    """``(first line number, logical line)`` for every non-blank, non-comment line, continuation
    lines joined (the trailing backslash removed, the next line's leading blanks dropped)."""
    lines = _LINE_BREAK.split(text)
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line):
            parts.append(line[:-1])
            if index >= len(lines):  # a backslash on the last line continues into nothing
                line = ""
                break
            line = lines[index].lstrip(_BLANKS)
            index += 1
        parts.append(line)
        yield number, "".join(parts)


def _continues(line: str) -> bool:
    """Whether ``line`` ends in an odd number of backslashes (the last one escapes the break)."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split(logical: str, source: str, number: int) -> tuple[str, str]:
    end = _key_end(logical)
    raw_key = logical[:end]
    rest = logical[end:].lstrip(_BLANKS)
    separated = end < len(logical)  # a separator or a blank followed the key
    explicit = bool(rest) and rest[0] in _SEPARATORS
    if explicit:
        rest = rest[1:].lstrip(_BLANKS)
    raw_value = _strip_trailing_blanks(rest)
    if not raw_key:
        raise PropertiesError(source, number, f"no key before {logical[:1]!r}: a line is "
                                              f"'key=value', 'key: value' or 'key value'")
    key = _unescape(raw_key, source, number)
    if not raw_value and not explicit:
        hint = "" if separated else f"; write '{key}=' for an empty value"
        raise PropertiesError(source, number, f"key {key!r} has no value (a line is 'key=value', "
                                              f"'key: value' or 'key value'){hint}")
    return key, _unescape(raw_value, source, number)


def _key_end(logical: str) -> int:
    """The index of the first unescaped separator or blank (``len`` if none)."""
    escaped = False
    for index, char in enumerate(logical):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _SEPARATORS or char in _BLANKS:
            return index
    return len(logical)


def _strip_trailing_blanks(raw: str) -> str:
    """``raw`` without trailing blanks, except one kept escaped by a backslash (``a\\ ``)."""
    stripped = raw.rstrip(_BLANKS)
    if len(stripped) < len(raw) and _continues(stripped):  # odd backslashes: the blank was escaped
        return raw[:len(stripped) + 1]
    return stripped


def _unescape(raw: str, source: str, number: int) -> str:
    if "\\" not in raw:
        return raw
    out = []
    index = 0
    while index < len(raw):
        char = raw[index]
        index += 1
        if char != "\\":
            out.append(char)
            continue
        if index >= len(raw):  # a lone trailing backslash stands for nothing, as in Java
            break
        escaped = raw[index]
        index += 1
        if escaped == "u":
            digits = raw[index:index + 4]
            if len(digits) < 4 or not set(digits) <= _HEX:
                raise PropertiesError(source, number, f"malformed escape '\\u{digits}': "
                                                      f"\\u takes four hex digits")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPES.get(escaped, escaped))
    return "".join(out)
