"""The README's quickstart, pasted block by block, runs without edits.

In order, as a user on a fresh clone does it: ``make install`` (run when this interpreter is the
``.venv`` it makes; otherwise this interpreter stands for it), the broker command in a process of
its own (on the port the README shows, or a free one if that is taken, the Python blocks
following it), then every Python block pasted into one interactive console in a fresh process
(``paste.py``) with none of the suite's Spark settings in its environment, only the JVM flags the
suite gives every short-lived Spark JVM (``JDK_JAVA_OPTIONS``: the C1 compiler, the serial
collector, Spark's class-data archive; they make the session start in about 3 s instead of 9,
and the pasted code is unchanged). Each "It prints `...`" after a block is checked against what
that block printed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .. import doc_examples
from .session import short_job_java_options

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.heavy, pytest.mark.timeout(300)]

ROOT = doc_examples.ROOT
README = ROOT / "README.md"
VENV_BIN = ".venv/bin/"


def quickstart_blocks() -> tuple[doc_examples.Block, ...]:
    return tuple(block for block in doc_examples.page_blocks(README)
                 if block.section == doc_examples.QUICKSTART)


def promised_output(block: doc_examples.Block) -> list[str]:
    """What the README says ``block`` prints: each `...` after "It prints" in the paragraph that
    follows the block (the first one, and one after "and")."""
    text = README.read_text(encoding="utf-8")
    lines = text.split("\n")
    end = next(i for i in range(block.line, len(lines)) if re.match(r"^\s*```\s*$", lines[i]))
    paragraph = []
    for line in lines[end + 1:]:
        if line.startswith("```") or (paragraph and not line.strip()):
            break
        if line.strip():
            paragraph.append(line.strip())
    said = " ".join(paragraph)
    match = re.match(r"It prints `([^`]+)`", said)
    return [match.group(1)] if match else []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def venv_command(words: list[str]) -> list[str]:
    """The README's ``.venv/bin/X`` as this interpreter's ``X``: the same file when the suite runs
    in the ``.venv`` that ``make install`` makes."""
    bin_dir = Path(sys.executable).parent
    return [str(bin_dir / word[len(VENV_BIN):]) if word.startswith(VENV_BIN) else word for word in words]


class Broker:
    """The README's broker command, running until :meth:`stop`; its output kept."""

    def __init__(self, command: list[str]):
        self.output: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))
            if line.startswith("bootstrap.servers="):
                self.ready.set()

    def wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the README's broker command did not print bootstrap.servers=:\n"
                                     + "\n".join(self.output[-40:]))
        return next(line for line in self.output if line.startswith("bootstrap.servers="))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)   # Ctrl-C's clean stop
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process.stdout.close()


def test_the_readme_quickstart_runs_as_pasted(tmp_path):
    blocks = quickstart_blocks()
    shell = [block for block in blocks if block.language == "sh"]
    python = [block for block in blocks if block.language == "python"]
    assert [block.code.strip() for block in shell[:1]] == ["make install"], \
        "the quickstart starts with `make install`"
    commands = [command for block in shell for command in doc_examples.broker_commands(block)]
    assert len(commands) == 1, "the quickstart starts one broker"
    assert python and all(block.no_run is None for block in python)
    if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
        subprocess.run(["make", "install"], cwd=ROOT, check=True, capture_output=True, timeout=600)

    shown = doc_examples.command_port(commands[0])
    port = shown if shown is not None and port_is_free(shown) else free_port()
    command = venv_command([str(port) if word == str(shown) else word for word in commands[0]])
    broker = Broker(command)
    try:
        started = time.monotonic()
        assert broker.wait_ready(180) == f"bootstrap.servers=127.0.0.1:{port}"
        print(f"broker ready in {time.monotonic() - started:.1f} s")
        pasted = [{"where": block.where,
                   "code": block.code.replace(doc_examples.BROKER_ADDRESS, f"127.0.0.1:{port}")}
                  for block in python]
        script = tmp_path / "blocks.json"
        script.write_text(json.dumps(pasted))
        env = {name: value for name, value in os.environ.items()
               if name not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")}
        env["JDK_JAVA_OPTIONS"] = short_job_java_options()
        run = subprocess.run([sys.executable, "-m", "tests.spark.paste", str(script)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=240)
        print(f"pasted in {time.monotonic() - started:.1f} s")
        print(run.stdout, run.stderr)
        assert run.returncode == 0, f"pasting the quickstart failed:\n{run.stderr[-6000:]}"
        printed = dict(zip([block.where for block in python],
                           run.stdout.split("### ")[1:]))
        for block in python:
            for promise in promised_output(block):
                assert promise in printed[block.where], \
                    f"{block.where} should print {promise!r}; it printed:\n{printed[block.where]}"
    finally:
        broker.stop()
