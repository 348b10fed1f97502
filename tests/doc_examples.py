"""The code blocks of README.md and docs/*.md, as the suite runs them (docs/development.md, "The
examples in these pages").

Every ```` ```python ```` block of a page runs, in order, in one namespace per page
(``tests/spark/test_doc_examples.py``), except a block right after a marker that says why it
cannot run here::

    <!-- no-run: needs a cloud service (Amazon MSK) -->

A marker without a reason, or one that no ``python`` block follows, is a :class:`MarkerError`.
The README's quickstart (the blocks under ``## Quickstart``) is run by its own test, as a user
pastes it (``tests/spark/test_quickstart.py``). A page names the broker it expects in a shell
block (``spark-kafka-sink broker --port 9092 --topic events:3 ...``): its ``--topic`` arguments,
and the topics of a ``spark-kafka-sink topics create`` line, are the topics the runner creates
first, and :data:`BROKER_ADDRESS` (and :data:`REGISTRY_URL`) in the Python blocks are rebound to
the suite's broker (and schema registry).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_sink.cli import TopicSpec, topic_spec

ROOT = Path(__file__).resolve().parents[1]
BROKER_ADDRESS = "127.0.0.1:9092"
"""The address the pages' Python blocks use: the port the broker command shows."""
REGISTRY_URL = "http://127.0.0.1:8081"
"""The schema registry the pages' Python blocks use: Confluent's default port."""
QUICKSTART = "## Quickstart"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*no-run\b(?P<rest>.*?)-->\s*$")
_SHELL = {"sh", "shell", "bash", "console", ""}


class MarkerError(ValueError):
    """A ``no-run`` marker without its reason, or with no ``python`` block right after it."""


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page (relative to the repository), the 1-based line of its
    opening fence, its language (the fence's first word), its code (dedented to the fence),
    why it does not run (``None``: it runs), and the ``##`` section it sits in."""

    page: str
    line: int
    language: str
    code: str
    no_run: str | None = None
    section: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}, the {self.language or 'plain'} block at line {self.line}"


def pages() -> tuple[Path, ...]:
    """README.md and every page under docs/, in a fixed order."""
    return (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


def relative(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def parse(text: str, page: str) -> tuple[Block, ...]:
    """The fenced blocks of ``text`` (the page ``page``), with their markers checked."""
    blocks: list[Block] = []
    lines = text.split("\n")
    pending: tuple[int, str] | None = None   # a marker's line and reason, waiting for its block
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        marker = _MARKER.match(line)
        if marker:
            if pending is not None:
                raise MarkerError(f"{page}:{pending[0]}: a no-run marker with no python block after it")
            reason = marker.group("rest").strip()
            if not reason.startswith(":") or not reason[1:].strip():
                raise MarkerError(f"{page}:{index + 1}: a no-run marker needs its reason: "
                                  "<!-- no-run: why this block cannot run here -->")
            pending = (index + 1, reason[1:].strip())
        elif fence:
            indent, opener = fence.group("indent"), fence.group("fence")
            info = fence.group("info").strip()
            language = info.split()[0].lower() if info else ""
            body: list[str] = []
            end = index + 1
            while end < len(lines) and not re.match(rf"^[ \t]*{re.escape(opener[0])}{{{len(opener)},}}\s*$",
                                                    lines[end]):
                body.append(lines[end][len(indent):] if lines[end].startswith(indent) else lines[end].lstrip())
                end += 1
            if end == len(lines):
                raise ValueError(f"{page}:{index + 1}: a code block that never closes")
            no_run = None
            if pending is not None:
                if language != "python":
                    raise MarkerError(f"{page}:{pending[0]}: a no-run marker with no python block after it")
                no_run = pending[1]
                pending = None
            blocks.append(Block(page, index + 1, language, "\n".join(body) + "\n", no_run, section))
            index = end
        elif line.strip():
            if line.startswith("## "):
                section = line.strip()
            if pending is not None:
                raise MarkerError(f"{page}:{pending[0]}: a no-run marker with no python block after it")
        index += 1
    if pending is not None:
        raise MarkerError(f"{page}:{pending[0]}: a no-run marker with no python block after it")
    return tuple(blocks)


def page_blocks(path: Path) -> tuple[Block, ...]:
    return parse(path.read_text(encoding="utf-8"), relative(path))


def runnable(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    """The Python blocks the page runner runs: unmarked, and (in the README) outside the
    quickstart, which its own test runs."""
    return tuple(block for block in blocks if block.language == "python" and block.no_run is None
                 and not (block.page == "README.md" and block.section == QUICKSTART))


def broker_topics(blocks: tuple[Block, ...]) -> tuple[TopicSpec, ...]:
    """The ``--topic`` arguments of every ``spark-kafka-sink broker`` command in the shell
    blocks and the topics of every ``spark-kafka-sink topics create``, each name once (the first
    partition count given wins)."""
    found: dict[str, TopicSpec] = {}
    for block in blocks:
        if block.language not in _SHELL:
            continue
        for spec in [spec for command in broker_commands(block) for spec in command_topics(command)] + \
                [spec for command in create_commands(block) for spec in created_topics(command)]:
            found.setdefault(spec.name, spec)
    return tuple(found.values())


def broker_commands(block: Block) -> list[list[str]]:
    """The ``spark-kafka-sink broker ...`` command lines of a shell block, split as a shell
    splits them (comments dropped)."""
    commands = []
    for line in block.code.splitlines():
        words = shlex.split(line, comments=True)
        for i, word in enumerate(words[:-1]):
            if Path(word).name == "spark-kafka-sink" and words[i + 1] == "broker":
                commands.append(words[i:])
                break
    return commands


def create_commands(block: Block) -> list[Any]:
    """The ``spark-kafka-sink topics create ...`` commands of a shell block, each parsed by the
    CLI's own parser (up to a shell operator: ``&&``, ``|``, ``;``, a redirection); one it
    refuses is a ``ValueError`` naming the block."""
    from spark_kafka_sink.cli import build_parser

    commands = []
    for line in block.code.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
        for i, word in enumerate(words[:-2]):
            if Path(word).name == "spark-kafka-sink" and words[i + 1:i + 3] == ["topics", "create"]:
                args = _before_operator(words[i + 1:])
                try:
                    commands.append(build_parser().parse_args(args))
                except SystemExit:
                    raise ValueError(f"{block.where}: the CLI refuses `spark-kafka-sink {' '.join(args)}`") from None
                break
    return commands


_OPERATOR_CHARS = set("();<>|&")
"""What shell operators and redirections are made of (``shlex``'s punctuation characters)."""


def _before_operator(words: list[str]) -> list[str]:
    """``words`` up to the first shell operator; a file descriptor's number before a redirection
    (``2>/dev/null``) is the redirection's, not an argument."""
    for at, word in enumerate(words):
        if set(word) <= _OPERATOR_CHARS:
            if word[0] in "<>" and at and words[at - 1].isdigit():
                at -= 1
            return words[:at]
    return words


def created_topics(command: Any) -> list[TopicSpec]:
    """The topics of a parsed ``topics create`` command."""
    return list(command.topics)


def command_topics(command: list[str]) -> list[TopicSpec]:
    """The topics a broker command creates (``--topic NAME[:PARTITIONS]``, repeatable)."""
    specs = []
    for i, word in enumerate(command):
        if word == "--topic" and i + 1 < len(command):
            specs.append(topic_spec(command[i + 1]))
        elif word.startswith("--topic="):
            specs.append(topic_spec(word.split("=", 1)[1]))
    return specs


def command_port(command: list[str]) -> int | None:
    """The ``--port`` of a broker command, or ``None``."""
    for i, word in enumerate(command):
        if word == "--port" and i + 1 < len(command):
            return int(command[i + 1])
        if word.startswith("--port="):
            return int(word.split("=", 1)[1])
    return None


def rebind(code: str, bootstrap: str, registry_url: str | None = None) -> str:
    """``code`` with :data:`BROKER_ADDRESS` (and :data:`REGISTRY_URL`) replaced by the suite's."""
    code = re.sub(re.escape(BROKER_ADDRESS) + r"(?!\d)", bootstrap, code)
    if registry_url is not None:  # with Apicurio's Confluent-compatible path or without
        code = re.sub(re.escape(REGISTRY_URL) + r"(?:/apis/ccompat/v7)?(?![\w/])", registry_url, code)
    return code


def needs_spark(blocks: tuple[Block, ...]) -> bool:
    return any("SparkSession" in block.code for block in blocks)


def needs_registry(blocks: tuple[Block, ...]) -> bool:
    return any(REGISTRY_URL in block.code for block in blocks)
