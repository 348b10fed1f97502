"""The README's pytest example for ``spark_kafka_sink.testing`` is the code the suite runs.

``tests/integration/test_testing_kit.py`` holds it between two marker comments; the README shows
the same lines after the imports the example needs. Editing one without the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "# --- README example: begin"
END = "# --- README example: end"


def _tested_example() -> str:
    text = (ROOT / "tests" / "integration" / "test_testing_kit.py").read_text()
    start = text.index("\n", text.index(BEGIN)) + 1
    return text[start:text.index(END)].strip()


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### A pytest example"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's pytest example has no python block"
    return match.group(1)


def test_the_readme_pytest_example_is_the_tested_code():
    example = _readme_example()
    assert _tested_example() in example, "README.md and test_testing_kit.py differ: update both"


def test_the_readme_example_imports_what_it_uses():
    example = _readme_example()
    for name in ("pytest", "KafkaProducer", "KafkaCluster"):
        assert re.search(rf"^(from \S+ )?import .*\b{name}\b", example, re.M), name


def test_every_document_the_code_refers_to_is_in_the_repository():
    """A ``*.md`` named in code, tests, benchmarks, jobs or the demo exists in the repository."""
    pattern = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
    missing = []
    for folder in ("spark_kafka_sink", "tests", "bench", "jobs", "demo"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in pattern.findall(path.read_text()):
                candidates = [ROOT / name, path.parent / name] + [
                    found for found in ROOT.rglob(Path(name).name)
                    if not {".venv", ".git", "build"} & set(found.relative_to(ROOT).parts)]
                if not any(candidate.is_file() for candidate in candidates):
                    missing.append(f"{path.relative_to(ROOT)} refers to {name}")
    assert not missing, "\n".join(missing)


def test_the_readmes_supported_apis_are_the_ones_the_protocol_declares():
    from spark_kafka_sink.protocol.apis import ALL_APIS

    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("Supported APIs:") + len("Supported APIs:"):].split(" — ")[0]
    assert [name.strip() for name in listed.split(",")] == [api.name for api in ALL_APIS]
