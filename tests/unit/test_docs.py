"""README.md, CHANGELOG.md and docs/: what can be checked without a broker or Spark.

The pytest example of docs/testing-kit.md is the code ``tests/integration/test_testing_kit.py``
runs (between two marker comments); the supported APIs of docs/protocol.md are the ones the
protocol declares; every page's ``no-run`` markers give their reason (``tests/doc_examples.py``,
whose parsing is checked here; the examples themselves run in ``tests/spark``); every page is in
the site's nav; every relative link of the pages points at a file; the README stays a landing
page.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from .. import doc_examples
from ..doc_examples import Block, MarkerError, parse

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "# --- docs/testing-kit.md example: begin"
END = "# --- docs/testing-kit.md example: end"


def _tested_example() -> str:
    text = (ROOT / "tests" / "integration" / "test_testing_kit.py").read_text()
    start = text.index("\n", text.index(BEGIN)) + 1
    return text[start:text.index(END)].strip()


def _documented_example() -> str:
    page = (ROOT / "docs" / "testing-kit.md").read_text()
    section = page[page.index("## A pytest example"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the testing kit's pytest example has no python block"
    return match.group(1)


def test_the_testing_kits_pytest_example_is_the_tested_code():
    example = _documented_example()
    assert _tested_example() in example, "docs/testing-kit.md and test_testing_kit.py differ: update both"


def test_the_testing_kits_example_imports_what_it_uses():
    example = _documented_example()
    for name in ("pytest", "KafkaProducer", "KafkaCluster"):
        assert re.search(rf"^(from \S+ )?import .*\b{name}\b", example, re.M), name


def test_every_document_the_code_refers_to_is_in_the_repository():
    """A ``*.md`` named in code, tests, benchmarks, jobs or the demo exists in the repository
    (this module's made-up pages and the site's generated ones aside)."""
    pattern = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
    names = _markdown_names()
    missing = []
    for folder in ("spark_kafka_sink", "tests", "bench", "jobs", "demo"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            for name in pattern.findall(path.read_text()):
                if not ((ROOT / name).is_file() or (path.parent / name).is_file()
                        or Path(name).name in names):
                    missing.append(f"{path.relative_to(ROOT)} refers to {name}")
    assert not missing, "\n".join(missing)


def _markdown_names() -> set[str]:
    """The names of the repository's ``*.md`` files: git's tracked ones, or, in a copy that is
    no git checkout (the mutation runs'), one walk that skips virtualenvs and build output."""
    listed = subprocess.run(["git", "ls-files", "*.md", "**/*.md"], cwd=ROOT, capture_output=True,
                            text=True)
    if listed.returncode == 0:
        return {Path(name).name for name in listed.stdout.split()}
    skipped = {".venv", ".git", "build", "compat", "site", ".hypothesis"}
    names = set()
    for _, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skipped]
        names.update(name for name in files if name.endswith(".md"))
    return names


def test_the_supported_apis_are_the_ones_the_protocol_declares():
    from spark_kafka_sink.protocol.apis import ALL_APIS

    page = (ROOT / "docs" / "protocol.md").read_text()
    listed = page[page.index("Supported APIs:") + len("Supported APIs:"):].split(" — ")[0]
    assert [name.strip() for name in listed.split(",")] == [api.name for api in ALL_APIS]


@pytest.mark.parametrize("path", doc_examples.pages(), ids=doc_examples.relative)
def test_every_page_parses_and_its_no_run_markers_give_a_reason(path):
    blocks = doc_examples.page_blocks(path)
    for block in blocks:
        assert block.no_run is None or len(block.no_run) > 10, f"{block.where}: say why it cannot run"


def test_the_pages_run_examples_and_mark_few():
    blocks = [block for path in doc_examples.pages() for block in doc_examples.page_blocks(path)
              if block.language == "python"]
    marked = [block for block in blocks if block.no_run]
    assert len(doc_examples.runnable(tuple(blocks))) >= 15
    assert len(marked) <= 6, "\n".join(block.where for block in marked)


def test_the_readme_stays_a_landing_page_with_a_quickstart():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    quickstart = [block for block in doc_examples.page_blocks(ROOT / "README.md")
                  if block.section == doc_examples.QUICKSTART]
    assert [block.language for block in quickstart][:2] == ["sh", "sh"]
    assert quickstart[0].code.strip() == "make install"
    broker = doc_examples.broker_commands(quickstart[1])
    assert broker and doc_examples.command_port(broker[0]) == 9092
    assert [spec.name for spec in doc_examples.command_topics(broker[0])] == ["events"]
    assert all(block.language == "python" and block.no_run is None for block in quickstart[2:])


def test_every_page_is_in_the_sites_nav_and_the_nav_names_only_pages():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def entries(nav):
        for item in nav:
            for value in item.values():
                yield from entries(value) if isinstance(value, list) else [value]

    nav = set(entries(config["nav"]))
    pages = {path.name for path in (ROOT / "docs").glob("*.md")} | {"index.md", "changelog.md"}
    assert nav == pages


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=doc_examples.relative)
def test_every_relative_link_of_a_page_points_at_a_file(path):
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^(https?:|mailto:|#)", target):
            continue
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            broken.append(target)
    assert not broken, f"{path.name}: {broken}"


# --- the examples' parser -------------------------------------------------------------------------

PAGE = """# A page

## Set-up

```sh
spark-kafka-sink broker --port 9092 --topic events:3 --topic events.dlq  # two topics
```

```python
servers = "127.0.0.1:9092"
```

<!-- no-run: needs a cloud service (Amazon MSK) -->
```python
connect_to_msk()
```

- a list item with a block:

  ```python
  x = 1
  ```
"""


def test_blocks_come_with_their_line_section_language_and_reason():
    blocks = parse(PAGE, "page.md")
    assert [(block.line, block.language, block.section) for block in blocks] == [
        (5, "sh", "## Set-up"), (9, "python", "## Set-up"), (14, "python", "## Set-up"),
        (20, "python", "## Set-up")]
    assert blocks[2].no_run == "needs a cloud service (Amazon MSK)"
    assert blocks[3].code == "x = 1\n"
    assert [block.line for block in doc_examples.runnable(blocks)] == [9, 20]
    assert blocks[1].where == "page.md, the python block at line 9"


@pytest.mark.parametrize("marker", ["<!-- no-run -->", "<!-- no-run: -->", "<!-- no-run:    -->",
                                    "<!-- no-run because -->"])
def test_a_no_run_marker_without_a_reason_is_refused(marker):
    with pytest.raises(MarkerError, match=r"page.md:3: a no-run marker needs its reason"):
        parse(f"# t\n\n{marker}\n```python\nx = 1\n```\n", "page.md")


@pytest.mark.parametrize("after", ["```sh\nls\n```\n", "Some text.\n\n```python\nx = 1\n```\n", "",
                                   "<!-- no-run: again -->\n```python\nx\n```\n"])
def test_a_no_run_marker_must_sit_right_before_a_python_block(after):
    with pytest.raises(MarkerError, match=r"page.md:1: a no-run marker with no python block after it"):
        parse(f"<!-- no-run: a reason -->\n{after}", "page.md")


def test_a_block_that_never_closes_is_refused():
    with pytest.raises(ValueError, match="page.md:2: a code block that never closes"):
        parse("text\n```python\nx = 1\n", "page.md")


def test_the_readmes_quickstart_is_left_to_its_own_test():
    blocks = (Block("README.md", 3, "python", "x\n", None, "## Quickstart"),
              Block("README.md", 9, "python", "y\n", None, "## Options"),
              Block("docs/a.md", 3, "python", "z\n", None, "## Quickstart"))
    assert [block.line for block in doc_examples.runnable(blocks)] == [9, 3]


def test_the_topics_a_page_asks_for_come_from_its_broker_commands():
    blocks = parse(PAGE + "```sh\n.venv/bin/spark-kafka-sink broker --topic orders --topic=events:9\n```\n",
                   "page.md")
    assert [(spec.name, spec.partitions) for spec in doc_examples.broker_topics(blocks)] == [
        ("events", 3), ("events.dlq", 1), ("orders", 1)]
    assert doc_examples.command_port(doc_examples.broker_commands(blocks[0])[0]) == 9092


def test_the_topics_a_page_creates_with_the_cli_are_created_too():
    blocks = parse(PAGE + "```sh\nspark-kafka-sink topics create --if-not-exists clicks:3 audit "
                   "--config retention.ms=1000 --bootstrap-server 127.0.0.1:9092  # two topics\n```\n",
                   "page.md")
    assert [(spec.name, spec.partitions) for spec in doc_examples.broker_topics(blocks)] == [
        ("events", 3), ("events.dlq", 1), ("clicks", 3), ("audit", 1)]
    shell = parse("```sh\nspark-kafka-sink topics create a:2 2>/dev/null && echo done | tee log; b\n"
                  ".venv/bin/spark-kafka-sink topics create c --config x=y=z\n```\n", "page.md")
    assert [(spec.name, spec.partitions) for spec in doc_examples.broker_topics(shell)] == [("a", 2), ("c", 1)]
    refused = parse("```sh\nspark-kafka-sink topics create 'bad topic'\n```\n", "page.md")
    with pytest.raises(ValueError, match="page.md, the sh block at line 1: the CLI refuses"):
        doc_examples.broker_topics(refused)


def test_the_broker_and_registry_addresses_are_rebound_and_nothing_else():
    code = 'a = "127.0.0.1:9092"; b = "http://127.0.0.1:8081"; c = "127.0.0.1:90921"'
    assert doc_examples.rebind(code, "127.0.0.1:4000", "http://127.0.0.1:5000/apis/ccompat/v7") == (
        'a = "127.0.0.1:4000"; b = "http://127.0.0.1:5000/apis/ccompat/v7"; c = "127.0.0.1:90921"')
    apicurio = 'u = "http://127.0.0.1:8081/apis/ccompat/v7"; v = "http://127.0.0.1:80811"'
    assert doc_examples.rebind(apicurio, "127.0.0.1:4000", "http://127.0.0.1:5000/apis/ccompat/v7") == (
        'u = "http://127.0.0.1:5000/apis/ccompat/v7"; v = "http://127.0.0.1:80811"')


def test_the_pages_that_run_agree_on_each_topics_partition_count():
    """The runner shares one broker across pages and creates each page's topics first: a topic
    another page made with another partition count would stay as that page made it (a page that
    reads the partitions it asked for would then wait out its read)."""
    asked: dict[str, set[tuple[int, str]]] = {}
    for path in doc_examples.pages():
        blocks = doc_examples.page_blocks(path)
        if doc_examples.runnable(blocks):
            for spec in doc_examples.broker_topics(blocks):
                asked.setdefault(spec.name, set()).add((spec.partitions, doc_examples.relative(path)))
    assert asked and {name: sorted(pages) for name, pages in asked.items()
                      if len({count for count, _ in pages}) > 1} == {}
