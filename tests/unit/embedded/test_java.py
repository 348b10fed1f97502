"""Finding a Java new enough for a tool (the registry's 21+), on fake ``java`` executables: small
scripts that print a version, in temporary Java homes."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_sink.embedded.errors import JavaNotFoundError
from spark_kafka_sink.embedded.java import find_java_at_least, service_flags

ENV = "SPARK_KAFKA_SINK_TEST_JAVA"


def _jdk(home: Path, version: str | None, *, mac: bool = False) -> Path:
    """A Java home whose ``bin/java`` prints ``version`` as ``java -version`` does (to stderr);
    with ``version=None`` it fails. Returns the ``java``."""
    java = (home / "Contents" / "Home" if mac else home) / "bin" / "java"
    java.parent.mkdir(parents=True)
    if version is None:
        java.write_text("#!/bin/sh\necho 'Error: could not create the Java Virtual Machine.' >&2\nexit 1\n")
    else:
        java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-01-01' >&2\n")
    java.chmod(0o755)
    return java


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No override, no JAVA_HOME, an empty PATH: each test adds what it needs."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    (tmp_path / "empty-path").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    return monkeypatch


def _find(directories=()):
    return find_java_at_least(21, ENV, "The test tool", jvm_directories=directories)


def test_the_override_wins_as_a_java_or_as_a_java_home(tmp_path, env):
    java21 = _jdk(tmp_path / "jdk21", "21.0.2")
    env.setenv("JAVA_HOME", str(_jdk(tmp_path / "jdk25", "25").parent.parent))
    env.setenv(ENV, str(java21))
    assert _find() == str(java21)
    env.setenv(ENV, str(tmp_path / "jdk21"))
    assert _find() == str(java21)


@pytest.mark.parametrize("version, said", [("17.0.15", "Java 17"), (None, "-version failed")])
def test_an_unusable_override_is_an_error_never_skipped(tmp_path, env, version, said):
    env.setenv(ENV, str(_jdk(tmp_path / "old", version)))
    _jdk(tmp_path / "jvm" / "jdk-25", "25")
    with pytest.raises(JavaNotFoundError) as caught:
        _find([tmp_path / "jvm"])
    message = str(caught.value)
    assert f"The test tool needs Java 21 or later, but {ENV}=" in message and said in message
    assert "or unset it" in message


def test_java_home_then_path_when_new_enough(tmp_path, env):
    on_path = _jdk(tmp_path / "path-jdk", "22")
    env.setenv("PATH", str(on_path.parent))
    assert _find() == str(on_path)
    env.setenv("JAVA_HOME", str(tmp_path / "home-jdk"))
    home_java = _jdk(tmp_path / "home-jdk", "21")
    assert _find() == str(home_java)


def test_the_newest_jdk_of_the_system_directories_when_the_others_are_too_old(tmp_path, env):
    env.setenv("JAVA_HOME", str(_jdk(tmp_path / "home-17", "17.0.15").parent.parent))
    jvm = tmp_path / "jvm"
    _jdk(jvm / "java-17-openjdk-amd64", "17.0.15")
    (jvm / "java-1.17.0-openjdk-amd64").symlink_to(jvm / "java-17-openjdk-amd64")
    _jdk(jvm / "openjdk-21", "21.0.5")
    newest = _jdk(jvm / "jdk-25-amd64", "25.0.3")
    (jvm / "not-a-jdk").mkdir()
    assert _find([tmp_path / "absent", jvm]) == str(newest)
    mac = tmp_path / "mac"
    mac_java = _jdk(mac / "jdk-21.jdk", "21.0.1", mac=True)
    assert _find([mac]) == str(mac_java)


def test_nothing_new_enough_names_every_place_and_what_was_there(tmp_path, env):
    home = _jdk(tmp_path / "home", "17.0.15")
    env.setenv("JAVA_HOME", str(home.parent.parent))
    jvm, empty = tmp_path / "jvm", tmp_path / "jvm-empty"
    old = _jdk(jvm / "java-17-openjdk-amd64", "17.0.15")
    (jvm / "java-1.17.0-openjdk-amd64").symlink_to(jvm / "java-17-openjdk-amd64")
    broken = _jdk(jvm / "broken", None)
    java8 = _jdk(jvm / "java-8", "1.8.0_392")
    empty.mkdir()
    with pytest.raises(JavaNotFoundError) as caught:
        _find([jvm, empty, tmp_path / "absent"])
    lines = str(caught.value).splitlines()
    assert lines[0] == "The test tool needs Java 21 or later; none found. Looked at:"
    assert lines[1:-1] == [
        f"  - {ENV}: not set",
        "  - PATH: no `java`",
        f"  - JAVA_HOME={home.parent.parent}: {home}: Java 17",
        f"  - {broken}: -version failed (exit 1): Error: could not create the Java Virtual Machine.",
        f"  - {old}: Java 17",  # its Debian alias is not listed twice
        f"  - {java8}: Java 8",
        f"  - {empty}: no JDK in it",
        f"  - {tmp_path / 'absent'}: no such directory",
    ]
    assert f"set JAVA_HOME or {ENV} to it" in lines[-1]


def test_a_java_home_without_java_and_a_java_that_cannot_run(tmp_path, env):
    env.setenv("JAVA_HOME", str(tmp_path / "nothing-here"))
    not_executable = _jdk(tmp_path / "noexec", "25")
    not_executable.chmod(0o644)
    env.setenv("PATH", str(not_executable.parent))
    with pytest.raises(JavaNotFoundError) as caught:
        _find()
    message = str(caught.value)
    assert f"JAVA_HOME={tmp_path / 'nothing-here'}: {tmp_path / 'nothing-here' / 'bin' / 'java'}: no such file" in message
    assert "PATH: no `java`" in message  # which() skips a file it cannot execute


def test_service_flags_keep_the_heap_small_and_compile_with_c1_only():
    flags = service_flags("128m", ["-Dx=1"])
    assert flags[:2] == ["-Xms128m", "-Xmx128m"]
    assert "-XX:TieredStopAtLevel=1" in flags and "-XX:+UseSerialGC" in flags
    assert flags[-1] == "-Dx=1"
    assert service_flags("64m")[:2] == ["-Xms64m", "-Xmx64m"]
