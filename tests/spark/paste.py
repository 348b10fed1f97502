"""Paste code blocks into an interactive Python console, as a user pastes them into ``python``.

    python -m tests.spark.paste BLOCKS.json

``BLOCKS.json`` is a list of ``{"where": ..., "code": ...}``. Each block's lines go to one
``code.InteractiveConsole`` in turn, compiled as the REPL compiles them (a compound statement
ends at a blank line; expression values are printed), then an empty line, as the user's Enter
after a paste. Before each block a line ``### <where>`` is printed, so that the output can be
told apart, and after it, on stderr, the seconds it took. The first error (a traceback or a syntax error) stops the run: exit code 1, the
block and its line named on stderr.
"""

from __future__ import annotations

import code
import json
import sys
import time


class _Console(code.InteractiveConsole):
    failed = False

    def showtraceback(self) -> None:
        self.failed = True
        super().showtraceback()

    def showsyntaxerror(self, filename=None, **kwargs) -> None:
        self.failed = True
        super().showsyntaxerror(filename, **kwargs)


def paste(blocks: list[dict]) -> int:
    console = _Console(locals={"__name__": "__main__"})
    for block in blocks:
        print(f"### {block['where']}", flush=True)
        started = time.monotonic()
        lines = block["code"].rstrip("\n").split("\n") + [""]
        for number, line in enumerate(lines, 1):
            console.push(line)
            sys.stdout.flush()
            if console.failed:
                print(f"{block['where']}: pasting its line {number} failed: {line!r}", file=sys.stderr)
                return 1
        print(f"{block['where']}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as source:
        sys.exit(paste(json.load(source)))
