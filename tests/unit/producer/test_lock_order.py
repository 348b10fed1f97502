"""The transaction wing's lock order (docs/ARCHITECTURE.md, "Threads and locks"), checked on the
source and at run time:

- ``TransactionManager._lock`` is a leaf: under it the manager calls only its own helpers that
  do not take it again, its own sets, ``TransactionalResult.done``, the state table and logging;
  ``manager.py`` imports nothing that could call back, and a manager holds no reference to
  anything that could;
- ``Idempotence`` has no lock, is called by the sender thread alone, and never under the
  manager's lock;
- nothing calls the sequence bookkeeping, the accumulator, the network client or the sender while
  holding the manager's lock: transactional and idempotent runs over the sender harness, and a
  real producer with its sender thread and several caller threads, with the manager's lock
  replaced by a test double that knows its holder.
"""

from __future__ import annotations

import ast
import functools
import inspect
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_kafka_sink.client.network_client import NetworkClient
from spark_kafka_sink.errors import ProducerFencedError
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.sender import Sender
from spark_kafka_sink.producer.transactions.idempotence import Idempotence
from spark_kafka_sink.producer.transactions.manager import TransactionManager
from spark_kafka_sink.producer.transactions.partition_map import ProducerIdAndEpoch
from spark_kafka_sink.producer.transactions.states import TransactionalResult, TransactionState
from spark_kafka_sink.protocol import ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR
from spark_kafka_sink.structs import Node, TopicPartition

from .sender_harness import Harness
from .threaded_cluster import Cluster

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "spark_kafka_sink"
MANAGER = PACKAGE / "producer" / "transactions" / "manager.py"
IDEMPOTENCE = PACKAGE / "producer" / "transactions" / "idempotence.py"
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)

# What the manager may call with its lock held (besides its own helpers that do not take it).
FUNCTIONS_UNDER_LOCK = {"next_state", "TransactionalResult", "ProducerIdAndEpoch", "frozenset",
                        "set", "bool", "str", "sorted", "getattr", "isinstance", "IllegalStateError",
                        "KafkaError", "TransactionAbortedError"}
MODULES_UNDER_LOCK = {"log", "errors"}             # logging; error classes
OWN_SETS = {"_in_transaction", "_new_partitions", "_pending_partitions"}
SET_METHODS = {"add", "clear", "discard", "remove", "update"}
RESULT_METHODS = {"done"}                          # TransactionalResult: sets an Event


def _transactional(**options) -> Harness:
    h = Harness(transactional_id="etl-1", **options)
    h.bootstrap()
    result = h.transaction_manager.initialize_transactions()
    h.run_until(lambda: result.is_done)
    result.wait(0)
    return h


def _complete(h: Harness, step) -> TransactionalResult:
    result = step()
    h.run_until(lambda: result.is_done, advance_ms=20, max_steps=200)
    return result


# --- on the source ------------------------------------------------------------------------------

def _is_lock(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "_lock"
            and isinstance(node.value, ast.Name) and node.value.id == "self")


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _manager_class() -> ast.ClassDef:
    tree = ast.parse(MANAGER.read_text())
    return next(node for node in tree.body
                if isinstance(node, ast.ClassDef) and node.name == "TransactionManager")


def _calls_under_lock() -> tuple[dict[str, ast.FunctionDef], set[str], list[tuple[str, ast.Call]]]:
    """The manager's methods, those that take the lock, and every call made with the lock held
    (in a ``with self._lock`` block, or in a method or property of the manager reached from one),
    each with the path that reaches it."""
    methods = {node.name: node for node in _manager_class().body
               if isinstance(node, ast.FunctionDef)}
    locking = {name for name, method in methods.items()
               if any(isinstance(node, ast.With) and any(_is_lock(i.context_expr) for i in node.items)
                      for node in ast.walk(method))}
    calls: list[tuple[str, ast.Call]] = []
    visited: set[str] = set()

    def visit(nodes: list[ast.stmt], where: str) -> None:
        for statement in nodes:
            for node in ast.walk(statement):
                if isinstance(node, ast.Call):
                    calls.append((where, node))
                reached = _self_attribute(node)
                if reached in methods and reached not in locking and reached not in visited:
                    visited.add(reached)
                    visit(methods[reached].body, f"{where} -> {reached}")

    for name, method in methods.items():
        for node in ast.walk(method):
            if isinstance(node, ast.With) and any(_is_lock(i.context_expr) for i in node.items):
                visit(node.body, name)
    return methods, locking, calls


def _allowed_under_lock(call: ast.Call, methods: dict[str, ast.FunctionDef], locking: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in FUNCTIONS_UNDER_LOCK
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and func.value.id in MODULES_UNDER_LOCK:
        return True
    own = _self_attribute(func)
    if own is not None:
        return own in methods and own not in locking
    holder = _self_attribute(func.value)
    return ((holder in OWN_SETS and func.attr in SET_METHODS)
            or (holder == "_result" and func.attr in RESULT_METHODS))


def test_under_its_lock_the_manager_calls_only_itself_its_results_and_logging():
    methods, locking, calls = _calls_under_lock()
    assert {"begin_commit", "fatal_error", "next_transactional_step", "may_drain"} <= locking
    assert len(calls) > 50                        # the walk reaches the helpers too
    wrong = [f"{where}: {ast.unparse(call)}" for where, call in calls
             if not _allowed_under_lock(call, methods, locking)]
    assert not wrong, "called with TransactionManager._lock held:\n" + "\n".join(wrong)


def test_no_method_of_the_manager_takes_its_lock_again():
    assert type(TransactionManager()._lock) is type(threading.Lock())    # not reentrant
    methods, locking, calls = _calls_under_lock()
    again = [f"{where} -> {_self_attribute(call.func)}" for where, call in calls
             if _self_attribute(call.func) in locking]
    assert not again, "a plain Lock taken twice by one thread never returns: " + ", ".join(again)


def test_the_manager_imports_nothing_that_could_call_back():
    imported = set()
    for node in ast.walk(ast.parse(MANAGER.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = "spark_kafka_sink.producer.transactions" if node.level == 1 else \
                "spark_kafka_sink" if node.level == 3 else node.module
            imported.add(base if node.level and not node.module else
                         f"{base}.{node.module}" if node.level else node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    producer = {name for name in imported if name.startswith("spark_kafka_sink.producer")}
    assert producer == {"spark_kafka_sink.producer.transactions.states",
                        "spark_kafka_sink.producer.transactions.partition_map"}
    assert not {name for name in imported if name.startswith("spark_kafka_sink.client")}


def test_the_sequence_bookkeeping_has_no_lock():
    tree = ast.parse(IDEMPOTENCE.read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "threading" not in modules and "multiprocessing" not in modules
    h = Harness(idempotent=True)
    h.bootstrap()
    h.run_until(h.append(T0).done, advance_ms=10)
    lock_types = (type(threading.Lock()), type(threading.RLock()), threading.Condition,
                  threading.Event, threading.Semaphore)
    assert vars(h.idempotence) and not [name for name, value in vars(h.idempotence).items()
                                        if isinstance(value, lock_types)]


def test_a_manager_holds_no_reference_it_could_call_back_through():
    """Whatever a run leaves in a manager's fields is plain data, its lock and its results."""
    h = _transactional()
    h.transaction_manager.begin_transaction()
    h.append(T0)
    _complete(h, h.transaction_manager.begin_commit).wait(0)
    plain = (str, int, bool, type(None), set, frozenset, TransactionState, ProducerIdAndEpoch,
             Node, TransactionalResult, BaseException, type(threading.Lock()))
    fields = vars(h.transaction_manager)
    assert isinstance(fields["coordinator"], Node) and isinstance(fields["_result"], TransactionalResult)
    assert not {name: type(value).__name__ for name, value in fields.items()
                if not isinstance(value, plain)}
    assert all(isinstance(tp, TopicPartition) for name in ("_in_transaction", "_new_partitions",
                                                           "_pending_partitions")
               for tp in fields[name])


# --- at run time --------------------------------------------------------------------------------

_HELD = threading.local()


def _holds_manager_lock() -> bool:
    return getattr(_HELD, "count", 0) > 0


@dataclass
class Watch:
    """What the guards saw: calls that came while their thread held a manager's lock, the
    guarded calls per class and the threads they came from, the threads that took the lock."""

    violations: list[str] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    threads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lock_threads: set[str] = field(default_factory=set)


class TrackedLock:
    """A test double for ``TransactionManager._lock``: a plain lock that knows its holder, so
    that the guards can ask whether the calling thread holds it, and that reports a second
    acquisition by the same thread (which would never return) instead of hanging."""

    def __init__(self, watch: Watch) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._watch = watch

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._owner == threading.get_ident():
            self._watch.violations.append("TransactionManager._lock taken again by its holder")
            raise AssertionError("TransactionManager._lock taken again by its holder")
        if not self._lock.acquire(blocking, timeout):
            return False
        self._owner = threading.get_ident()
        _HELD.count = getattr(_HELD, "count", 0) + 1
        self._watch.lock_threads.add(threading.current_thread().name)
        return True

    def release(self) -> None:
        self._owner = None
        _HELD.count -= 1
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> "TrackedLock":
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def _guarded(function, owner: str, watch: Watch):
    @functools.wraps(function)
    def call(*args, **kwargs):
        watch.calls[owner] += 1
        watch.threads[owner].add(threading.current_thread().name)
        if _holds_manager_lock():
            watch.violations.append(f"{owner}.{function.__name__} called on "
                                    f"{threading.current_thread().name} under the manager's lock")
        return function(*args, **kwargs)
    return call


@pytest.fixture
def watch(monkeypatch) -> Watch:
    """Every manager made from here on has a :class:`TrackedLock`; every public method of the
    sequence bookkeeping, the accumulator, the network client and the sender records its
    thread and whether that thread held a manager's lock."""
    seen = Watch()
    original_init = TransactionManager.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self._lock = TrackedLock(seen)

    monkeypatch.setattr(TransactionManager, "__init__", init)
    for cls in (Idempotence, RecordAccumulator, NetworkClient, Sender):
        for name, value in list(vars(cls).items()):
            if inspect.isfunction(value) and not name.startswith("_"):
                monkeypatch.setattr(cls, name, _guarded(value, cls.__name__, seen))
    return seen


def _checked(watch: Watch) -> None:
    assert watch.violations == []
    assert watch.calls["Idempotence"] and watch.calls["RecordAccumulator"] \
        and watch.calls["NetworkClient"] and watch.calls["Sender"]


def test_transactions_call_out_only_without_the_managers_lock(watch):
    for version in (1, 2):                       # commit, then an abortable error and its abort
        h = _transactional(transaction_version=version)
        manager = h.transaction_manager
        manager.begin_transaction(version)
        futures = [h.append(T0), h.append(T1)]
        h.run_until(lambda: all(f.done() for f in futures), advance_ms=10)
        _complete(h, manager.begin_commit).wait(0)
        manager.begin_transaction(version)
        h.script(T0, {"error_code": 45})           # OUT_OF_ORDER_SEQUENCE_NUMBER
        failed = h.append(T0)
        h.run_until(failed.done, advance_ms=10)
        assert manager.state is TransactionState.ABORTABLE_ERROR
        _complete(h, manager.begin_abort).wait(0)
        assert manager.state is TransactionState.READY
    fenced = _transactional()
    fenced.transaction_manager.begin_transaction()
    fenced.script(T0, {"error_code": 47})          # INVALID_PRODUCER_EPOCH: fatal, as fenced
    fenced.run_until(fenced.append(T0).done, advance_ms=10)
    assert isinstance(fenced.transaction_manager.last_error, ProducerFencedError)
    _checked(watch)
    assert isinstance(fenced.transaction_manager._lock, TrackedLock)


def test_the_idempotent_producers_epoch_bumps_call_out_only_without_the_managers_lock(watch):
    h = Harness(idempotent=True)
    h.bootstrap()
    h.script(T0, {"error_code": 45}, {"error_code": 59, "log_start_offset": 0})
    futures = [h.append(T0), h.append(T1)]
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=20, max_steps=300)
    assert h.transaction_manager.producer_id_and_epoch.epoch == 2
    h.cluster_id = "B"                             # the cluster replaced: a new producer id
    h.metadata.request_update(h.now)
    h.run_until(lambda: h.metadata.snapshot.cluster_id == "B", advance_ms=20)
    later = h.append(T0)
    h.run_until(later.done, advance_ms=20, max_steps=300)
    assert later.result() is not None
    _checked(watch)


def _transactional_cluster() -> Cluster:
    """The threaded cluster's broker, also the transaction coordinator (transaction version 1)."""
    cluster = Cluster()

    def find_coordinator(request):
        found = {"node_id": 1, "host": "b1", "port": 9092, "error_code": 0, "error_message": None}
        if request.version >= 4:
            return {"throttle_time_ms": 0,
                    "coordinators": [{"key": request.body.coordinator_keys[0], **found}]}
        return {"throttle_time_ms": 0, **found}

    def add_partitions(request):
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": topic.name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": 0} for p in topic.partitions]}
            for topic in request.body.v3_and_below_topics]}

    cluster.broker.handlers.update({
        FIND_COORDINATOR.api_key: find_coordinator,
        ADD_PARTITIONS_TO_TXN.api_key: add_partitions,
        END_TXN.api_key: lambda request: {"throttle_time_ms": 0, "error_code": 0}})
    return cluster


def test_a_real_producer_keeps_the_sequences_on_its_sender_thread_and_out_of_the_lock(watch):
    """A transactional producer with its sender thread; the caller's steps on this thread and
    sends from two more. The sequence bookkeeping is only ever called on the sender thread,
    the manager's lock is taken on both sides, and nothing is called under it."""
    cluster = _transactional_cluster()
    try:
        producer = cluster.producer(**{"transactional.id": "etl-1"})
        producer.init_transactions(timeout=10)
        for commit in (True, False):
            producer.begin_transaction()
            callers = [threading.Thread(target=lambda p=p: [producer.send("t", b"v", partition=p)
                                                            for _ in range(20)],
                                        name=f"caller-{p}") for p in (0, 1)]
            for caller in callers:
                caller.start()
            for caller in callers:
                caller.join(10)
            if commit:
                producer.commit_transaction(10)
            else:
                producer.abort_transaction(10)
        io_thread = producer._thread.name
    finally:
        cluster.close_producers()
    assert watch.violations == []
    assert watch.threads["Idempotence"] == {io_thread}
    assert {"caller-0", "caller-1"} <= watch.threads["RecordAccumulator"]
    assert {io_thread, threading.current_thread().name} <= watch.lock_threads
    assert sum(len(batches) for batches in cluster.batches.values()) >= 2
