"""Checks that a compatibility virtualenv still holds the versions its pins file asked for, after
the package and its extras were installed over them (``make compat``): installing
``spark-kafka-sink[spark]`` must keep a supported PySpark, and its libraries, that are already there.

Usage: ``python -m compat.check compat/pyspark-3.4.txt``; exit 1 naming every version that moved.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def pins(text: str) -> dict[str, str]:
    """``{distribution: version}`` of the ``name==version`` lines of a pins file."""
    return {m.group(1).lower(): m.group(2) for line in text.splitlines() if (m := PIN.match(line))}


def moved(wanted: dict[str, str]) -> list[str]:
    """One line per pinned distribution whose installed version differs (or that is missing)."""
    problems = []
    for name, version in sorted(wanted.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: pinned {version}, not installed")
            continue
        if installed != version:
            problems.append(f"{name}: pinned {version}, installed {installed}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as file:
        wanted = pins(file.read())
    problems = moved(wanted)
    if problems:
        print(f"{argv[0]}: installing the package changed pinned versions:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 1
    shown = ", ".join(f"{name} {version}" for name, version in sorted(wanted.items()))
    print(f"{argv[0]}: kept {shown} (Python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
