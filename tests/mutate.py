"""A small mutation run: does the fast test layer (tests/unit) notice when the code is wrong?

Each mutant is one hand-written source change (file, exact original snippet, replacement) that
makes a behaviour wrong in a way a user would notice. The script copies the repository's working
tree (tracked and untracked files, not ignored ones) to a temporary directory once, then for each
mutant: writes the mutated file into the copy, runs pytest there (``PYTHONPATH`` set to the copy)
with a time limit, and puts the original file back. The repository itself is never written, so
an interrupted run leaves nothing mutated.

For each mutant pytest runs twice at most, with ``-x``: first the mutant's own tests (the files
most likely to catch it, a few seconds), then, if those pass, the whole selection (``--tests``,
default ``tests/unit``), so "survived" always means the whole fast layer passed.

Outcomes, one line per mutant, then the totals:

- ``killed``   a test failed (or the run passed the time limit: ``killed (timeout)``);
- ``survived`` every test passed: no fast test checks that behaviour;
- ``stale``    the original snippet is not in the file, or more than once, or the mutated file
  does not compile (the code changed: update the mutant); never counted as killed.
  ``killed (pytest exit N)``: pytest stopped otherwise (a collection error: the mutant broke an
  import); counted as killed, since the unmutated selection passed.

Hypothesis runs with a fixed seed (``--hypothesis-seed``), so the baseline and every mutant's
runs draw the same examples: a property test that fails now and then on a random example (a
defect it finds by chance) shows in the baseline, or nowhere, rather than as a kill of whichever
mutant it happened under.

Before the mutants, the selection runs once unmutated (``--no-baseline`` skips it): if it fails,
every mutant would look killed, so the run stops.

Usage (from the repository root, with the test dependencies installed)::

    python -m tests.mutate                  # every mutant, full tests/unit behind each
    python -m tests.mutate --list           # the mutants, and whether their snippets still match
    python -m tests.mutate -k txn -k dlq    # only mutants whose name contains one of these
    python -m tests.mutate --tests tests/unit/producer --json out.json

To compare two versions of the tests (say, before and after making the suite faster), run the
same mutants and ``--tests`` on both and compare the totals (or the ``--json`` files): a mutant
that was killed before and survives after is a check the change lost.

Adding a mutant: append a :class:`Mutant` to :data:`MUTANTS`. The original snippet must occur
exactly once in its file (include enough context); the change should be one a plausible bug
would make, not one that cannot import. Exit status: 0 when every mutant was killed, 1 when one
survived or went stale, 2 when the unmutated selection fails or the copy does not import itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ("tests/unit",)
HYPOTHESIS_SEED = 0
DEFAULT_LIMIT_S = 300.0
"""Per mutant: the unit suite takes 60-100 s on a busy 2-core machine."""

PKG = "spark_kafka_sink"
TM = f"{PKG}/producer/transactions/manager.py"
ID = f"{PKG}/producer/transactions/idempotence.py"
TR = f"{PKG}/producer/transactions/requests.py"
RS = f"{PKG}/producer/transactions/resumable.py"
CF = f"{PKG}/client/factory.py"
PW = f"{PKG}/spark/partition_writer.py"
TK = f"{PKG}/spark/task.py"
AW = f"{PKG}/spark/arrow_writer.py"
DL = f"{PKG}/spark/dead_letters.py"
PF = f"{PKG}/spark/preflight.py"
CL = f"{PKG}/spark/commit_log.py"
EO = f"{PKG}/spark/exactly_once.py"
SK = f"{PKG}/spark/sink.py"
PB = f"{PKG}/producer/producer_batch.py"
SE = f"{PKG}/producer/sender.py"
MD = f"{PKG}/client/metadata.py"
OA = f"{PKG}/client/auth/oauth.py"
OI = f"{PKG}/client/auth/oidc.py"
UR = f"{PKG}/client/urls.py"
SRT = f"{PKG}/schema_registry/transport.py"
SRC = f"{PKG}/schema_registry/client.py"
SRK = f"{PKG}/schema_registry/config.py"
PR = f"{PKG}/producer/producer.py"
AC = f"{PKG}/producer/accumulator.py"
FU = f"{PKG}/producer/future.py"

U = "tests/unit"
TXN_TESTS = (f"{U}/producer/test_transactions.py", f"{U}/producer/test_txn_requests.py",
             f"{U}/producer/test_idempotence.py",
             f"{U}/producer/test_producer_transactions.py")
RESUMABLE_TESTS = (f"{U}/producer/test_resumable.py", f"{U}/producer/test_producer_transactions.py")
FACTORY_TESTS = (f"{U}/client/test_factory.py", f"{U}/producer/test_resumable.py")
WRITER_TESTS = (f"{U}/spark/test_partition_writer.py", f"{U}/spark/test_arrow_writer.py")
DLQ_TESTS = (f"{U}/spark/test_dead_letters.py",)
PREFLIGHT_TESTS = (f"{U}/spark/test_preflight.py",)
EOS_TESTS = (f"{U}/spark/test_exactly_once.py", f"{U}/spark/test_commit_log.py")
CRASH_TESTS = (f"{U}/spark/test_driver_crash.py",)
OAUTH_TESTS = (f"{U}/client/test_oauth.py",)
REGISTRY_TESTS = (f"{U}/schema_registry",)
CLUSTER_TESTS = (f"{U}/client/test_metadata.py", f"{U}/producer/test_sender.py",
                 f"{U}/producer/test_idempotence.py")
BATCH_TESTS = (f"{U}/producer/test_producer_batch.py", f"{U}/producer/test_sender.py",
               f"{U}/spark/test_dead_letters.py")
SEND_TESTS = (f"{U}/producer/test_producer_send.py",)
STICKY_TESTS = (f"{U}/producer/test_accumulator.py",)


@dataclass(frozen=True)
class Mutant:
    """One source change: ``original`` (exactly once in ``path``) becomes ``replacement``.
    ``tests``: the test files to try first (they must exist; missing ones are left out)."""

    name: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...] = ()


MUTANTS: list[Mutant] = [
    # --- the transaction manager ---------------------------------------------------------------
    Mutant("txn-produce-invalid-epoch-not-fatal", ID,
           "code == ErrorCode.INVALID_PRODUCER_EPOCH and self._transactional)",
           "False)", TXN_TESTS),
    Mutant("txn-invalid-epoch-not-fenced", ID,
           "_FENCED_CODES = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})",
           "_FENCED_CODES = frozenset({ErrorCode.PRODUCER_FENCED})", TXN_TESTS),
    Mutant("txn-refused-record-never-abortable", ID,
           "if self._transactional and not batch.refusal_kept(exception):",
           "if False:", TXN_TESTS),
    Mutant("txn-gap-needs-no-epoch-bump", ID,
           "manager.require_epoch_bump()   # it may have left a sequence gap",
           "pass", TXN_TESTS),
    Mutant("txn-end-before-batches-complete", TM,
           "and not has_incomplete_batches and not self._new_partitions",
           "and not self._new_partitions", TXN_TESTS),
    Mutant("txn-empty-transaction-sends-end-txn", TM,
           "if ending and not self._transaction_started:", "if False:", TXN_TESTS),
    Mutant("txn-commit-in-progress-not-failed", TM,
           """            if self._result is not None and not self._result.is_done:
                self._result.done(self._abortable("commit_transaction"))""",
           """            pass""", TXN_TESTS),
    Mutant("txn-v2-enrols-with-add-partitions", TM,
           "if self._transaction_version >= 2:   # Produce v12 enrols it", "if False:", TXN_TESTS),
    Mutant("txn-drains-before-enrolled", ID,
           """        if self._transactional and not manager.may_drain(tp):
            return False""",
           """        if self._transactional:
            manager.may_drain(tp)""", TXN_TESTS),
    Mutant("txn-v2-end-epoch-ignored", TM,
           "if producer_id >= 0 and epoch >= 0:", "if False:", TXN_TESTS),
    Mutant("txn-hands-out-before-enrolled", TM,
           "if self._new_partitions or self._pending_partitions:", "if False:",
           TXN_TESTS + RESUMABLE_TESTS),
    Mutant("txn-resumed-without-partitions-started", TM,
           "self._transaction_started = bool(partitions)", "self._transaction_started = False",
           RESUMABLE_TESTS),
    # --- the transactional requests ------------------------------------------------------------
    Mutant("txn-transaction-abortable-is-fatal", TR,
           "_ABORTABLE = frozenset({ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.UNKNOWN_PRODUCER_ID,",
           "_ABORTABLE = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID,", TXN_TESTS),
    Mutant("txn-coordinator-invalid-epoch-not-fenced", TR,
           "_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})",
           "_FENCED = frozenset({ErrorCode.PRODUCER_FENCED})", TXN_TESTS),
    Mutant("txn-coordinator-moved-not-looked-up", TR,
           """        if code in _COORDINATOR_MOVED:
            self.manager.set_coordinator(None)
            return HandlerOutcome.RETRY""",
           """        if code in _COORDINATOR_MOVED:
            return HandlerOutcome.RETRY""", TXN_TESTS),
    Mutant("txn-init-abortable-not-fatal", TR,
           "if body.error_code in _ABORTABLE:         # nothing to abort while initialising",
           "if False:", TXN_TESTS),
    Mutant("txn-end-txn-v5-under-v1", TR,
           "self.max_version = None if manager.transaction_version >= 2 else 4",
           "self.max_version = None", TXN_TESTS),
    Mutant("txn-retry-without-backoff", TR,
           "self._not_before_ms = response.received_ms + self._retry_backoff_ms",
           "self._not_before_ms = response.received_ms", TXN_TESTS),
    Mutant("txn-dead-coordinator-waited-on", TR,
           "if self._client.connection_failed(node.node_id):", "if False:", TXN_TESTS),
    # --- resumable transactions ----------------------------------------------------------------
    Mutant("resumable-commit-sends-abort", RS,
           "result = manager.begin_commit() if commit else manager.begin_abort()",
           "result = manager.begin_abort()", RESUMABLE_TESTS),
    Mutant("resumable-foreign-transactional-id-accepted", RS,
           "if cfg.transactional_id not in (None, transaction.transactional_id):", "if False:",
           RESUMABLE_TESTS),
    Mutant("resumable-timeout-in-seconds-as-ms", RS,
           "budget_ms = cfg.max_block_ms if timeout is None else int(timeout * 1000)",
           "budget_ms = cfg.max_block_ms if timeout is None else int(timeout)", RESUMABLE_TESTS),
    # --- the client factory (KafkaProducer and the resumable path) -----------------------------
    Mutant("factory-selector-never-closes-idle-connections", CF,
           "connections_max_idle_ms=settings.connections_max_idle_ms,", "", FACTORY_TESTS),
    Mutant("factory-metadata-idle-left-at-default", CF,
           "metadata_max_idle_ms=config.metadata_max_idle_ms,", "", FACTORY_TESTS),
    Mutant("factory-observers-not-wired", CF,
           "throttle_observer=observers.throttle,", "throttle_observer=None,", FACTORY_TESTS),
    # --- the Spark writers ---------------------------------------------------------------------
    Mutant("writer-failed-task-leaves-transaction-open", TK,
           """    except BaseException:
        _abort_quietly(producer)
        raise
    return TaskRun(""",
           """    except BaseException:
        raise
    return TaskRun(""", WRITER_TESTS + (f"{U}/spark/test_driver_write.py",)),
    Mutant("writer-transactional-producer-not-closed", TK,
           """    finally:
        producer.close(producer_config.delivery_timeout_ms / 1000)""",
           """    finally:
        pass""", WRITER_TESTS),
    Mutant("writer-transaction-outside-a-task", TK,
           "if info.partition_id < 0:", "if False:", WRITER_TESTS),
    Mutant("writer-rows-go-on-after-a-failure", PW,
           """        for position, row in enumerate(rows):
            if tally.first_failure is not None:
                return
            record = convert(row, position)""",
           """        for position, row in enumerate(rows):
            record = convert(row, position)""", WRITER_TESTS),
    Mutant("arrow-batches-go-on-after-a-failure", AW,
           """            if outcome.first_failure is not None or outcome.send_error is not None:
                return""",
           """            pass""", WRITER_TESTS),
    Mutant("arrow-error-row-ignores-earlier-batches", AW,
           "row = position + int(row if indices is None else indices[row])",
           "row = int(row if indices is None else indices[row])", WRITER_TESTS),
    Mutant("arrow-rechunk-past-the-row-budget", AW,
           "if pending and (rows + batch.num_rows > max_rows or size + batch.nbytes > max_bytes):",
           "if pending and (rows > max_rows or size + batch.nbytes > max_bytes):", WRITER_TESTS),
    # --- dead letters --------------------------------------------------------------------------
    Mutant("dlq-skipped-not-counted", DL,
           """            self.skipped += 1
            return""",
           """            return""", DLQ_TESTS),
    Mutant("dlq-context-headers-always", DL,
           "context = tuple(self.context_headers(bad)) if self.policy.context_headers else ()",
           "context = tuple(self.context_headers(bad))", DLQ_TESTS),
    Mutant("dlq-none-context-written", DL,
           "for name, value in pairs if value is not None]", "for name, value in pairs]",
           DLQ_TESTS),
    Mutant("dlq-log-burst-one-more", DL,
           "if self._logged >= LOG_BURST:", "if self._logged > LOG_BURST:", DLQ_TESTS),
    Mutant("dlq-context-values-not-capped", DL,
           """(HEADER_PREFIX + name, cap(str(value).encode("utf-8")))""",
           """(HEADER_PREFIX + name, str(value).encode("utf-8"))""", DLQ_TESTS),
    Mutant("dlq-topic-limit-ignored", DL,
           "return max_record_size if topic_limit is None else min(max_record_size, topic_limit)",
           "return max_record_size", DLQ_TESTS + PREFLIGHT_TESTS),
    Mutant("dlq-replayed-context-trusted", DL,
           "start = len(names) - 1 - names[::-1].index(TOPIC_HEADER)",
           "start = names.index(TOPIC_HEADER)", DLQ_TESTS),
    Mutant("dlq-errors-by-class-not-summed", DL,
           "self.errors_by_class[name] = self.errors_by_class.get(name, 0) + 1",
           "self.errors_by_class[name] = 1", DLQ_TESTS),
    # --- preflight -----------------------------------------------------------------------------
    Mutant("preflight-runs-when-disabled", PF,
           """    if not config.preflight:
        return PreflightResult()""",
           """    if not config.preflight:
        pass""", PREFLIGHT_TESTS),
    Mutant("preflight-dlq-never-created", PF,
           "if plan.create is not None and not _exists(found, plan.create):", "if False:",
           PREFLIGHT_TESTS),
    Mutant("preflight-created-dlq-still-missing", PF,
           """            found.update(ask(plan.plain, False))""", """            pass""",
           PREFLIGHT_TESTS),
    Mutant("preflight-config-error-ignored", PF,
           "if description.config_error is not None:", "if False:", PREFLIGHT_TESTS),
    Mutant("preflight-ignores-max-block-ms", PF,
           "timeout_s = min(TIMEOUT_S, max(1.0, producer.max_block_ms / 1000))",
           "timeout_s = TIMEOUT_S", PREFLIGHT_TESTS),
    # --- the exactly-once driver and its commit log --------------------------------------------
    Mutant("commit-log-reads-other-prefixes", CL,
           "if record.key != key or record.value is None:", "if record.value is None:", EOS_TESTS),
    Mutant("eos-commits-after-a-lost-transaction", EO,
           "break                            # the rest are aborted (see _give_up)",
           "continue", EOS_TESTS),
    Mutant("eos-probe-not-upward", EO,
           "scan, end = end, top + FENCE_GAP", "scan, end = end, end", EOS_TESTS),
    Mutant("eos-probe-gap-of-one", EO, "FENCE_GAP = 8", "FENCE_GAP = 1", EOS_TESTS),
    Mutant("eos-probe-own-fence-counts-as-use", EO,
           "fenced.producer_epoch <= window[index] + 1", "fenced.producer_epoch <= window[index]",
           EOS_TESTS),
    Mutant("eos-probe-task-use-counts-as-own-fence", EO,
           "fenced.producer_epoch <= window[index] + 1", "fenced.producer_epoch <= window[index] + 2",
           EOS_TESTS),
    Mutant("eos-committed-batch-not-recognised", EO,
           """        return (last is not None and last.batch_id == batch_id
                and last.state is BatchState.COMMITTED)""",
           "        return False", EOS_TESTS),
    Mutant("eos-no-recovery-after-a-failed-record", EO,
           """            self._record_committed(record)
        except BaseException:
            self._forget()
            raise""",
           """            self._record_committed(record)
        except BaseException:
            raise""", EOS_TESTS),
    Mutant("eos-expired-id-not-lost", EO,
           "_LOST = (ProducerFencedError, InvalidTxnStateError, InvalidProducerIdMappingError)",
           "_LOST = (ProducerFencedError, InvalidTxnStateError)", EOS_TESTS),
    Mutant("commit-log-invalid-epoch-not-driver-fenced", CL,
           "if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):",
           "if isinstance(error, ProducerFencedError):", EOS_TESTS),
    Mutant("commit-log-delete-policy-accepted", CL,
           """if "compact" in policies and ("delete" not in policies or kept):""",
           """if "compact" in policies:""", EOS_TESTS),
    Mutant("commit-log-other-query-id-ignored", CL,
           "other = query_id is not None and last.query_id is not None and last.query_id != query_id",
           "other = False", EOS_TESTS),
    # --- a driver killed mid-batch, then restarted (the end-to-end crash points) ---------------
    Mutant("eos-recovery-leaves-a-prepared-batch", EO,
           "if last is not None and last.state is BatchState.PREPARED and last.transactions:",
           "if False:",
           CRASH_TESTS + EOS_TESTS),
    Mutant("eos-recovered-batch-not-recorded-committed", EO,
           "self._last = replace(last, state=BatchState.COMMITTED)", "self._last = last",
           CRASH_TESTS + EOS_TESTS),
    Mutant("eos-recovery-commits-only-the-first-transaction", EO,
           "committed, lost = self._commit_all(last)",
           "committed, lost = self._commit_all(replace(last, transactions=last.transactions[:1]))",
           CRASH_TESTS + EOS_TESTS),
    Mutant("eos-recovered-batch-not-a-replay", EO,
           "if is_replay(self._last, batch_id, query_id, self._log.topic):",
           "if is_replay(self._last, batch_id, query_id, self._log.topic) and not recovery.recovered:",
           CRASH_TESTS + EOS_TESTS),
    Mutant("eos-commit-time-not-measured", EO,
           "return BatchCommit(batch_id, len(transactions), 0, self._ms_since(started))",
           "return BatchCommit(batch_id, len(transactions), 0, 0.0)", CRASH_TESTS + EOS_TESTS),
    Mutant("sink-replay-written-again", SK, "if start.replay:", "if False:", CRASH_TESTS),
    Mutant("sink-replay-not-counted", SK,
           "BatchCommit(key, 0, 0, 0.0, replay=True).figures()",
           "BatchCommit(key, 0, 0, 0.0).figures()", CRASH_TESTS),
    Mutant("sink-micro-batch-keyed-afresh", SK,
           "key = write_batch_id() if batch_id is None else str(batch_id)",
           "key = write_batch_id()", CRASH_TESTS),
    # --- cluster replaced, refused batches -----------------------------------------------------
    Mutant("metadata-cluster-change-unnoticed", MD,
           """        if previous is None or previous == cluster_id:
            return None""",
           """        return None""", CLUSTER_TESTS),
    Mutant("sender-cluster-change-ignored", SE,
           "self._idempotence.cluster_changed(change.previous, change.current)", "pass",
           CLUSTER_TESTS),
    Mutant("txn-cluster-change-transactional-goes-on", ID,
           """        if self._transactional:
            manager.fatal_error(ClusterChangedError(""",
           """        if False:
            manager.fatal_error(ClusterChangedError(""", CLUSTER_TESTS),
    Mutant("txn-cluster-change-keeps-producer-id", TM,
           """            if self._state is TransactionState.READY:
                self._reset_producer_id()
            elif""",
           """            if False:
                self._reset_producer_id()
            elif""", CLUSTER_TESTS),
    Mutant("batch-refused-whole-counts-as-alone", PB,
           "return self.record_count == 1 and is_record_error(error)",
           "return is_record_error(error)", BATCH_TESTS),
    # --- OAuth / OIDC --------------------------------------------------------------------------
    Mutant("oauth-fetch-on-caller-thread", OA,
           """threading.Thread(target=work, name="oauth-token-refresh", daemon=True).start()""",
           "work()", OAUTH_TESTS),
    Mutant("oidc-deadline-per-read-only", OI,
           "connection._create_connection = deadline.create_connection", "pass", OAUTH_TESTS),
    Mutant("oidc-follows-redirects", OI,
           "_NoRedirects(), _HttpHandler(deadline)", "_HttpHandler(deadline)", OAUTH_TESTS),
    Mutant("urls-user-info-shown", UR,
           """urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))""",
           """urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path, "", ""))""",
           OAUTH_TESTS),
    Mutant("urls-query-shown", UR,
           """urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))""",
           """urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, parsed.query, ""))""",
           OAUTH_TESTS),
    # --- the Schema Registry client --------------------------------------------------------------
    Mutant("registry-no-failover-on-5xx", SRT,
           "if answer.status in FAILOVER_STATUSES:", "if False:", REGISTRY_TESTS),
    Mutant("registry-asks-every-time", SRC,
           """            if key in self._cache:
                return self._cache[key]""",
           """            if False:
                return self._cache[key]""", REGISTRY_TESTS),
    Mutant("registry-subject-slash-unescaped", SRC,
           """urllib.parse.quote(subject, safe="")""", "urllib.parse.quote(subject)", REGISTRY_TESTS),
    Mutant("registry-secret-in-redacted-view", SRK,
           "out[name] = HIDDEN if redact and prop.secret else value", "out[name] = value",
           REGISTRY_TESTS),
    Mutant("driver-keeps-its-producer-through-a-job", SK,
           "                self._drop_driver_producer()       # task 0 of the job fences <prefix>-0\n",
           "", (f"{U}/spark/test_driver_crash.py",)),
    Mutant("driver-write-guess-never-learns", SK,
           "            self._small.saw(_rows_of(metrics))\n        else:",
           "            pass\n        else:", (f"{U}/spark/test_driver_write.py",)),
    Mutant("registry-latest-version-also-registers", SRK,
           """        values["auto_register_schemas"] = False""", """        pass""", REGISTRY_TESTS),
    # --- send()'s per-record shortcuts -----------------------------------------------------------
    Mutant("send-route-kept-across-snapshots", PR,
           "                and route.snapshot is self._metadata.snapshot):",
           "                and True):", SEND_TESTS),
    Mutant("send-key-cache-keeps-every-key", PR,
           "            if len(by_key) >= KEY_CACHE_SIZE:\n                by_key.clear()\n",
           "", SEND_TESTS),
    Mutant("send-route-reused-across-milliseconds", PR,
           "        if (route is not None and route.used_wall_ms == wall_ms\n",
           "        if (route is not None and route.used_wall_ms >= 0\n", SEND_TESTS),
    Mutant("sticky-open-path-forgets-the-bytes", AC,
           "                sticky.produced_bytes = produced\n", "                pass\n", STICKY_TESTS),
    Mutant("done-callback-runs-for-every-record", FU,
           "        for fn in self._completion._done_callbacks.get(self._index, ()):",
           "        for fn in [f for fs in self._completion._done_callbacks.values() for f in fs]:",
           BATCH_TESTS),
]


@dataclass(frozen=True)
class Result:
    """A mutant's outcome (see the module docstring) and how long its runs took."""

    name: str
    outcome: str
    seconds: float
    detail: str = ""


def check_snippet(mutant: Mutant, source: str) -> str | None:
    """Why ``mutant`` cannot be applied to ``source`` (its file's text), or None."""
    count = source.count(mutant.original)
    if count == 0:
        return "original snippet not found (the code changed: update the mutant)"
    if count > 1:
        return f"original snippet found {count} times (add context to make it unique)"
    try:
        compile(source.replace(mutant.original, mutant.replacement, 1), mutant.path, "exec")
    except SyntaxError as error:
        return f"the mutated file does not compile (line {error.lineno}: update the mutant)"
    return None


def copy_tree(root: Path, target: Path) -> None:
    """The working tree's tracked and untracked, not ignored, files under ``target``."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if not source.is_file():
            continue                              # deleted in the working tree
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)


def run_pytest(copy: Path, tests: list[str], limit_s: float, basetemp: Path) -> tuple[int | None, str]:
    """pytest ``-x`` over ``tests`` in ``copy``: (exit code, or None past ``limit_s``; last lines)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               f"--basetemp={basetemp}", f"--hypothesis-seed={HYPOTHESIS_SEED}", *tests]
    process = subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        _kill(process)
        return None, ""
    except BaseException:                         # interrupted: leave nothing running
        _kill(process)
        raise
    lines = output.decode(errors="replace").strip().splitlines()
    return process.returncode, "\n".join(lines[-3:])


def _kill(process: subprocess.Popen) -> None:
    """Kill pytest and whatever it started (its own session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()


def run_mutant(mutant: Mutant, copy: Path, tests: list[str], limit_s: float, basetemp: Path) -> Result:
    """Apply ``mutant`` in ``copy``, run its tests then ``tests``, restore the file."""
    target = copy / mutant.path
    original = target.read_text()
    problem = check_snippet(mutant, original)
    if problem is not None:
        return Result(mutant.name, "stale", 0.0, problem)
    started = time.monotonic()
    target.write_text(original.replace(mutant.original, mutant.replacement, 1))
    try:
        first = [t for t in mutant.tests if (copy / t).exists()]
        for selection in ([first] if first else []) + [tests]:
            remaining = limit_s - (time.monotonic() - started)
            code, tail = run_pytest(copy, selection, max(remaining, 1.0), basetemp)
            if code is None:
                return Result(mutant.name, "killed (timeout)", time.monotonic() - started)
            if code == 1:
                failed = next((line for line in tail.splitlines() if line.startswith("FAILED")), "")
                return Result(mutant.name, "killed", time.monotonic() - started, failed)
            if code != 0:
                return Result(mutant.name, "killed (pytest exit %d)" % code,
                              time.monotonic() - started, tail.splitlines()[-1] if tail else "")
        return Result(mutant.name, "survived", time.monotonic() - started)
    finally:
        target.write_text(original)


def imports_from(copy: Path) -> bool:
    """Whether Python run as the mutants are imports the package from ``copy`` (not from an
    installed or editable copy elsewhere)."""
    env = {**os.environ, "PYTHONPATH": str(copy)}
    where = subprocess.run([sys.executable, "-c", f"import {PKG}; print({PKG}.__file__)"], cwd=copy,
                           env=env, capture_output=True, text=True).stdout.strip()
    return Path(where).resolve().is_relative_to(copy.resolve())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.mutate", description=__doc__.split("\n\n")[0],
        epilog="See the module docstring (tests/mutate.py) for the outcomes and how to compare runs.")
    parser.add_argument("-k", dest="names", action="append", default=[],
                        help="run only mutants whose name contains this (repeatable)")
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS),
                        help="the pytest selection each surviving mutant must pass (default: "
                             "%(default)s)")
    parser.add_argument("--limit", type=float, default=DEFAULT_LIMIT_S,
                        help="seconds per mutant, both runs together (default: %(default)s)")
    parser.add_argument("--list", action="store_true",
                        help="list the mutants and whether their snippets match; run nothing")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unmutated run of --tests")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    return parser.parse_args(argv)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)     # a kill cleans up as Ctrl-C does
    mutants = [m for m in MUTANTS if not args.names or any(k in m.name for k in args.names)]
    if args.list:
        for mutant in mutants:
            problem = check_snippet(mutant, (ROOT / mutant.path).read_text())
            print(f"{'stale' if problem else 'ok':6} {mutant.name:48} {mutant.path}"
                  + (f"  ({problem})" if problem else ""))
        return 0
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        copy, basetemp = Path(tmp) / "tree", Path(tmp) / "pytest"
        copy_tree(ROOT, copy)
        if not imports_from(copy):
            print(f"the copy does not import its own {PKG} (PYTHONPATH is not first?)")
            return 2
        if not args.no_baseline:
            started = time.monotonic()
            code, tail = run_pytest(copy, args.tests, args.limit, basetemp)
            print(f"baseline: {' '.join(args.tests)}: exit {code} in {time.monotonic() - started:.0f} s")
            if code != 0:
                print(tail)
                return 2
        results = []
        for mutant in mutants:
            result = run_mutant(mutant, copy, args.tests, args.limit, basetemp)
            results.append(result)
            print(f"{result.outcome:18} {result.name:48} {result.seconds:6.1f} s  {result.detail}",
                  flush=True)
    totals: dict[str, int] = {}
    for result in results:
        key = result.outcome.split(" ")[0]
        totals[key] = totals.get(key, 0) + 1
    print("total: " + ", ".join(f"{key} {totals.get(key, 0)}"
                                for key in ("killed", "survived", "stale")) + f" of {len(results)}")
    if args.json is not None:
        args.json.write_text(json.dumps({"tests": args.tests, "totals": totals,
                                         "mutants": [asdict(r) for r in results]}, indent=2))
    return 0 if totals.get("survived", 0) + totals.get("stale", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
