"""examples/metrics.ipynb runs as written, in a Jupyter kernel (nbclient): its own broker and local
SparkSession, two writes, the sink's summary lines in the cell's output (notebook_logging) and
``sink.metrics_history`` rendered as an HTML table.

The kernel's JVMs (the broker's, Spark's) live for seconds: they start with the tests' quick-start
options (``session.QUICK_START_JAVA_OPTIONS``, through ``JDK_JAVA_OPTIONS``, which every ``java``
reads), which take about a third off the run; the notebook itself is run as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .session import QUICK_START_JAVA_OPTIONS

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "metrics.ipynb"
TIMEOUT_S = 240


def outputs(notebook, kind: str) -> list[str]:
    """Every output of the notebook's code cells: ``"stream"`` (stdout's texts) or ``"html"``."""
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if kind == "stream" and output.get("name") == "stdout":
                found.append(output["text"])
            elif kind == "html" and "text/html" in output.get("data", {}):
                found.append(output["data"]["text/html"])
    return found


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_the_example_notebook_shows_the_summary_lines_and_the_metrics_table(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("JDK_JAVA_OPTIONS", f"{os.environ.get('JDK_JAVA_OPTIONS', '')} "
                                           f"{QUICK_START_JAVA_OPTIONS}".strip())
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not outputs(notebook, "stream") + outputs(notebook, "html"), "kept without outputs"
    NotebookClient(notebook, timeout=TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    lines = [line for text in outputs(notebook, "stream") for line in text.splitlines()
             if line.startswith("KafkaSink: ")]
    assert len(lines) == 2, lines
    for line, sent in zip(lines, (1000, 100)):
        assert re.match(rf"KafkaSink: write written in \d+\.\d{{3}} s: record-send-total={sent} "
                        r"record-error-total=0 ", line), line
    history, last = outputs(notebook, "html")
    assert history.startswith('<table class="dataframe spark-kafka-sink-metrics">'), history
    header = re.findall(r"<th>(.*?)</th>", history)
    assert header[:6] == ["batch_id", "record-send-total", "byte-total", "record-error-total",
                          "seconds", "record-send-rate"], header
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", history)]
    assert [row[:2] for row in rows] == [["write", "1000"], ["write", "100"]], rows
    assert "<th>topic.events.record-send-total</th><td>100</td>" in last, last
