"""The schema registry's launcher (``testing/schema_registry.py``) on fake ``java`` executables and
a fake cache entry: its command line, readiness, failures and stop. The real registry runs in
``tests/integration/test_schema_registry_kit.py``."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest

from spark_kafka_sink import cli
from spark_kafka_sink.cli import serve
from spark_kafka_sink.embedded import DEFAULT_APICURIO_VERSION, RegistryStartError
from spark_kafka_sink.embedded.errors import PortInUseError
from spark_kafka_sink.embedded.ports import check_free, free_ports
from spark_kafka_sink.testing import SchemaRegistry

# Says it is Java 25 when asked; else answers 503 once, then 200 on the ccompat subjects path,
# having recorded its arguments in its cwd.
FAKE_REGISTRY = """\
import http.server, json, sys
if sys.argv[1:] == ["-version"]:
    sys.exit(print('openjdk version "25.0.1" 2025-10-21', file=sys.stderr))
props = dict(arg[2:].split("=", 1) for arg in sys.argv[1:] if arg.startswith("-D"))
with open("argv.json", "w") as out:
    json.dump(sys.argv[1:], out)
answers = [503]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status = (answers.pop() if answers else 200) if self.path == "/apis/ccompat/v7/subjects" else 404
        self.send_response(status)
        self.end_headers()
        self.wfile.write(b"[]")
    def log_message(self, *args):
        pass
http.server.HTTPServer((props["quarkus.http.host"], int(props["quarkus.http.port"])), Handler).serve_forever()
"""


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache root holding an 'unpacked' registry (its marker and quarkus-run.jar); no AppCDS."""
    monkeypatch.setenv("SPARK_KAFKA_SINK_CDS", "0")
    app = tmp_path / "cache" / f"apicurio-registry-{DEFAULT_APICURIO_VERSION}"
    app.mkdir(parents=True)
    (app / "quarkus-run.jar").write_bytes(b"PK")
    (app / ".complete").write_text(json.dumps({"version": DEFAULT_APICURIO_VERSION, "method": "maven"}))
    return tmp_path / "cache"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_starts_on_loopback_answers_and_stops_by_pid(tmp_path, cache):
    java = _script(tmp_path / "java", f"#!{sys.executable}\n{FAKE_REGISTRY}")
    registry = SchemaRegistry(java=java, cache_dir=cache, heap="96m", java_options=["-Dextra.flag=1"],
                              properties={"quarkus.http.host": "127.0.0.1", "apicurio.x": "y"})
    with pytest.raises(RuntimeError, match="not started"):
        registry.url
    assert repr(registry) == f"SchemaRegistry(version={DEFAULT_APICURIO_VERSION}, stopped)"
    with registry:
        assert registry.is_alive and registry.start_seconds > 0
        assert registry.url == f"http://127.0.0.1:{registry.port}/apis/ccompat/v7"
        assert registry.base_url == f"http://127.0.0.1:{registry.port}"
        assert registry.client_conf() == {"url": registry.url, "timeout": 10}
        assert registry.port != registry.management_port
        argv = json.loads((registry.directory / "argv.json").read_text())
        work_dir, pid, port = registry.directory, registry.pid, registry.port
    assert argv[:2] == ["-Xms96m", "-Xmx96m"] and "-XX:TieredStopAtLevel=1" in argv
    assert argv[argv.index("-Dextra.flag=1") + 1].startswith("-Djava.io.tmpdir=")
    properties = [arg for arg in argv if arg.startswith("-D")]
    for expected in ("-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}",
                     "-Dquarkus.management.host=127.0.0.1", "-Dapicurio.storage.kind=sql",
                     "-Dapicurio.storage.sql.kind=h2"):
        assert expected in properties
    assert properties.count("-Dquarkus.http.host=127.0.0.1") == 1  # the caller's replaces ours
    assert properties[-1] == "-Dapicurio.x=y"
    assert argv[-2:] == ["-jar", str(cache / f"apicurio-registry-{DEFAULT_APICURIO_VERSION}" / "quarkus-run.jar")]
    # Stopped by process id and reaped; its port is free again and its temporary directory gone.
    assert _gone(pid) and registry.pid is None and not registry.is_alive
    check_free(port)
    assert not work_dir.exists()
    assert registry.close() is None  # idempotent


def test_an_exit_during_start_up_raises_with_the_log_tail_and_keeps_a_given_work_dir(tmp_path, cache):
    java = _script(tmp_path / "java", "#!/bin/sh\necho 'Port already bound: 8080' >&2\nexit 3\n")
    work = tmp_path / "work"
    properties = {"apicurio.auth.client-secret": "s3cr3t-value"}
    with pytest.raises(RegistryStartError) as caught:
        SchemaRegistry(java=java, cache_dir=cache, work_dir=work, properties=properties).start()
    message = str(caught.value)
    assert f"exited with code 3 during start-up (log {work / 'registry.log'})" in message
    assert message.rstrip().endswith("Port already bound: 8080")
    log = (work / "registry.log").read_text()
    assert log.startswith(f"=== spark-kafka-sink: starting Apicurio Registry {DEFAULT_APICURIO_VERSION} at ")
    # The caller's properties are named, their values never shown (they may be credentials).
    assert "-Dapicurio.auth.client-secret=(hidden)" in log and "-Dquarkus.http.host=127.0.0.1" in log
    assert "s3cr3t-value" not in log + message


class _RacingClock:
    """Monotonic time that stands still until ``ready`` exists, then jumps a minute at every read:
    the deadline passes once the fake registry has started."""

    def __init__(self, ready: Path) -> None:
        self._ready = ready
        self._ms = 0

    def monotonic_ms(self) -> int:
        if self._ready.exists():
            self._ms += 60_000
        return self._ms


def test_no_answer_in_time_raises_and_kills_the_process_group(tmp_path, cache):
    pid_file = tmp_path / "pid"
    java = _script(tmp_path / "java", f"#!/bin/sh\necho $$ > {pid_file}.tmp\nmv {pid_file}.tmp {pid_file}\n"
                                         "exec sleep 30\n")
    registry = SchemaRegistry(java=java, cache_dir=cache, start_timeout_s=5, clock=_RacingClock(pid_file))
    with pytest.raises(RegistryStartError) as caught:
        registry.start()
    message = str(caught.value)
    assert "did not answer GET http://127.0.0.1:" in message and "within 5 s (last: " in message
    assert "(log " not in message  # a temporary work dir is gone by now: the tail is in the message
    assert registry.pid is None and registry.directory is not None and not registry.directory.exists()
    assert _gone(int(pid_file.read_text()))  # the sleep that replaced the shell


def test_a_forgotten_registry_is_killed_by_its_finalizer(tmp_path, cache):
    java = _script(tmp_path / "java", f"#!{sys.executable}\n{FAKE_REGISTRY}")
    registry = SchemaRegistry(java=java, cache_dir=cache).start()
    pid, work_dir = registry.pid, registry.directory
    del registry
    gc.collect()
    assert _gone(pid) and not work_dir.exists()


def test_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="start_timeout_s must be positive"):
        SchemaRegistry(start_timeout_s=0)


def test_the_probe_ignores_proxy_settings(tmp_path, cache, monkeypatch):
    # A proxy variable that points nowhere: the loopback probe must not go through it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed.getsockname()[1]}")
    java = _script(tmp_path / "java", f"#!{sys.executable}\n{FAKE_REGISTRY}")
    with SchemaRegistry(java=java, cache_dir=cache, start_timeout_s=3) as registry:
        assert registry.is_alive


def test_the_cli_prints_the_url_and_stops_the_registry_on_sigint(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("SPARK_KAFKA_SINK_REGISTRY_JAVA", _script(tmp_path / "java", f"#!{sys.executable}\n{FAKE_REGISTRY}"))
    said: list[str] = []
    ready = threading.Event()

    def say(text: str, err: bool = False) -> None:
        said.append(text)
        if text == "Press Ctrl-C to stop.":
            ready.set()

    def interrupt() -> None:  # Ctrl-C, once the command waits for it
        if ready.wait(10):
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(serve, "say", say)
    threading.Thread(target=interrupt, daemon=True).start()
    code = cli.main(["schema-registry", "--cache-dir", str(cache), "--work-dir", str(tmp_path / "work")])
    assert code == 0, said
    url = next(line for line in said if line.startswith("schema.registry.url="))
    assert re.fullmatch(r"schema\.registry\.url=http://127\.0\.0\.1:\d+/apis/ccompat/v7", url)
    pid = int(re.search(r", pid (\d+), ", "\n".join(said)).group(1))
    assert _gone(pid) and said[-2:] == ["Stopping...", "Stopped."]
    assert (tmp_path / "work" / "registry.log").is_file()  # a given --work-dir is kept


def test_a_given_port_serves_the_api_and_a_taken_one_is_refused_before_any_launch(tmp_path, cache, monkeypatch):
    java = _script(tmp_path / "java", f"#!{sys.executable}\n{FAKE_REGISTRY}")
    (port,) = free_ports(1)
    with SchemaRegistry(java=java, cache_dir=cache, port=port, start_timeout_s=5) as registry:
        assert registry.url == f"http://127.0.0.1:{port}/apis/ccompat/v7" and registry.management_port != port
    with pytest.raises(ValueError, match="port must be 1-65535, got 0"):
        SchemaRegistry(port=0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        registry = SchemaRegistry(java=java, cache_dir=cache, port=busy)
        with pytest.raises(PortInUseError, match=f"the schema registry's port 127.0.0.1:{busy} is already in use"):
            registry.start()
        assert registry.pid is None and not registry.is_alive
        said: list[str] = []
        monkeypatch.setattr(serve, "say", lambda text, err=False: said.append(text))
        monkeypatch.setenv("SPARK_KAFKA_SINK_REGISTRY_JAVA", java)
        assert cli.main(["schema-registry", "--port", str(busy), "--cache-dir", str(cache)]) == 1
        assert any(f"127.0.0.1:{busy} is already in use" in line for line in said), said
