"""``jobs/stream_to_kafka.py`` under ``spark-submit --master spark://...`` on a Spark standalone
cluster on loopback (``spark_kafka_sink.testing.spark_standalone``): a master and two workers,
each worker with its own 1-core executor JVM and Python workers, as users run the sink; the
other Spark tests run in ``local[2]``, where tasks run inside the driver's JVM.

What a reader independent of ours (confluent-kafka, through the demo's read-back) finds in the
topic, what the sink's metrics say (summed on the driver over both executors' tasks), how many
producers the tasks created (one per Python worker while workers are reused, one per task when
``spark.python.worker.reuse=false``), and an executor SIGKILLed while its Python worker is
writing: its tasks run again elsewhere and every event arrives.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from demo.clicks import write_clicks
from demo.readback import read_back
from spark_kafka_sink.spark.submit import spark_submit_command
from spark_kafka_sink.testing.spark_standalone import SparkStandalone, cpu_seconds, python_workers

from ..helpers import create_topic
from .session import short_job_java_options

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4
JOB_TIMEOUT_S = 300
EXECUTOR_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2, memory="1g",
                         java_options=short_job_java_options()) as running:
        yield running


class Job:
    """One ``spark-submit`` of the streaming job on the cluster, its output in a log file."""

    def __init__(self, cluster: SparkStandalone, work: Path, events: int, files: int, per_trigger: int,
                 bootstrap: str, conf: dict[str, str] | None = None) -> None:
        self.topic = f"standalone-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, self.topic, PARTITIONS)
        self.events = events
        data = write_clicks(work / "clicks", events, files, seed=11)
        self.metrics_path = work / "metrics.json"
        self.log = work / "spark-submit.log"
        args = ["--source", str(data.directory), "--format", "json", "--topic", self.topic,
                "--bootstrap", bootstrap, "--key-column", "user_id",
                "--checkpoint", str(work / "checkpoint"), "--trigger", "availableNow",
                "--max-files-per-trigger", str(per_trigger), "--metrics-json", str(self.metrics_path),
                "--timeout", str(JOB_TIMEOUT_S - 30)]
        java_options = short_job_java_options()
        command = spark_submit_command(ROOT / "jobs" / "stream_to_kafka.py", args, conf_dir=ROOT / "conf",
                                       master=cluster.master_url, java_options=java_options,
                                       conf={**EXECUTOR_CONF, "spark.executor.extraJavaOptions": java_options,
                                             **(conf or {})})
        self.batches_done = threading.Event()  # the first micro-batch line was printed
        self._out = open(self.log, "w", encoding="utf-8")  # noqa: SIM115 - closed in wait()
        self.process = subprocess.Popen(command.argv, env=command.environ(), cwd=ROOT, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        for line in self.process.stdout:
            self._out.write(line)
            if line.startswith("micro-batch "):
                self.batches_done.set()

    def wait(self) -> dict:
        """The job's metrics file once it ended with 0 (else an assertion with its log's tail)."""
        try:
            code = self.process.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=30)
        self._reader.join(timeout=10)
        self.process.stdout.close()
        self._out.close()
        assert code == 0, f"spark-submit exited with {code}:\n{self.output()[-6000:]}"
        return json.loads(self.metrics_path.read_text(encoding="utf-8"))

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _tasks_by_executor(cluster: SparkStandalone, app_id: str) -> dict[str, int]:
    return {path.parent.name: path.read_text(errors="replace").count("Running task ")
            for path in cluster.executor_logs(app_id)}


def _app_ids(cluster: SparkStandalone) -> set[str]:
    return {path.parents[1].name for path in cluster.executor_logs()}


def _check_every_event_once(kafka, job: Job, metrics: dict) -> dict:
    got = read_back(kafka.bootstrap_servers, job.topic, PARTITIONS, timeout_s=120)
    assert got.total == got.distinct_events == job.events and got.key_mismatches == 0, got
    totals = metrics["metrics_total"]
    assert metrics["rows_written"] == job.events and totals["record-send-total"] == job.events
    assert totals["record-error-total"] == 0
    return totals


@pytest.mark.timeout(JOB_TIMEOUT_S + 120)
def test_the_stream_job_on_two_executors_pools_one_producer_per_python_worker(cluster, kafka, tmp_path):
    before = _app_ids(cluster)
    job = Job(cluster, tmp_path, events=24_000, files=6, per_trigger=2, bootstrap=kafka.bootstrap_servers)
    metrics = job.wait()
    totals = _check_every_event_once(kafka, job, metrics)

    (app_id,) = _app_ids(cluster) - before
    # Executors that ran no task are left out: when the driver stops, its executors may exit before
    # the app unregisters, and the master then launches a replacement on each worker that the
    # driver never uses (a race of Spark's standalone shutdown, more likely on a busy machine).
    every = _tasks_by_executor(cluster, app_id)
    tasks = {executor: count for executor, count in every.items() if count}
    assert len(tasks) == 2, f"tasks did not run on both executors: {every}"
    # 3 micro-batches of 2 files, a task per file: the driver summed the metrics of all 6 tasks
    assert totals["task-total"] == 6 and metrics["batches"] == 3
    # with reused Python workers, each executor's worker created its producer once and kept it
    created = totals["producer-create-total"]
    assert 2 <= created < totals["task-total"], totals
    print(f"standalone: tasks per executor {tasks}; producer-create-total {created} "
          f"for task-total {totals['task-total']}")


@pytest.mark.timeout(JOB_TIMEOUT_S + 120)
def test_without_python_worker_reuse_every_task_creates_its_producer(cluster, kafka, tmp_path):
    job = Job(cluster, tmp_path, events=12_000, files=4, per_trigger=2, bootstrap=kafka.bootstrap_servers,
              conf={"spark.python.worker.reuse": "false"})
    totals = _check_every_event_once(kafka, job, job.wait())
    assert totals["task-total"] == 4
    assert totals["producer-create-total"] == totals["task-total"], totals


@pytest.mark.timeout(JOB_TIMEOUT_S + 120)
def test_an_executor_killed_while_writing_loses_nothing(cluster, kafka, tmp_path):
    job = Job(cluster, tmp_path, events=160_000, files=8, per_trigger=2, bootstrap=kafka.bootstrap_servers)
    killed = None
    deadline = time.monotonic() + JOB_TIMEOUT_S - 60
    # after the first micro-batch, kill the first executor whose Python workers are busy: a sink
    # task is writing on it
    assert job.batches_done.wait(timeout=JOB_TIMEOUT_S - 60), f"no micro-batch ended:\n{job.output()[-4000:]}"
    while killed is None and job.process.poll() is None and time.monotonic() < deadline:
        executors = cluster.executors()
        workers = {executor: python_workers(executor) for executor in executors}
        spent = {executor: cpu_seconds(pids) for executor, pids in workers.items()}
        time.sleep(0.1)
        busy = {executor: cpu_seconds(pids) - spent[executor] for executor, pids in workers.items()}
        busiest = max(busy, key=busy.get, default=None)
        if busiest is not None and busy[busiest] > 0.02:
            cluster.kill(busiest)
            killed = busiest
    assert killed is not None, f"no executor was seen writing before the job ended:\n{job.output()[-4000:]}"

    metrics = job.wait()
    output = job.output()
    assert "Lost executor" in output or "ExecutorLostFailure" in output, output[-6000:]
    # at-least-once: the killed tasks ran again, so some events may be there twice; none is missing
    got = read_back(kafka.bootstrap_servers, job.topic, PARTITIONS, timeout_s=120)
    assert got.distinct_events == job.events and got.key_mismatches == 0, got
    assert got.total >= job.events
    # the driver counts only the tasks that succeeded: every event once
    assert metrics["metrics_total"]["record-send-total"] == job.events
    print(f"standalone: killed executor {killed.executor_id} (pid {killed.pid}) mid-batch; "
          f"{got.total - job.events} duplicate(s) from the re-run tasks")
