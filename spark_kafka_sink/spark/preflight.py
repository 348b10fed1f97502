"""The driver's preflight: check the cluster and the sink's topics once, before any task runs.

Without it a wrong password, an unreachable cluster or a missing topic shows only in the tasks,
each waiting ``max.block.ms`` (60 s by default) before failing, and a ``max.request.size`` above a
topic's ``max.message.bytes`` shows only when the first large batch is refused. :func:`preflight`
opens one connection from the driver (a second one only to create the dead-letter topic), within
:data:`TIMEOUT_S` and ``max.block.ms`` at most, and checks

1. that the cluster answers and accepts the client's credentials (TLS, SASL);
2. that the ``topic`` option's topic and the dead-letter topic exist. A missing one is asked for
   as the tasks' producer would ask (its Metadata request lets the broker create topics on
   demand, ``auto.create.topics.enable``, with the broker's defaults), except a dead-letter topic
   with ``errors.deadletterqueue.topic.replication.factor`` set: the sink creates that one itself
   (one partition, that replication factor). A topic still missing is asked for again for up to
   :data:`MISSING_WAIT_MS` (a topic created a moment before may not have reached the broker that
   answers yet); then it is an error;
3. that ``kafka.max.request.size`` does not exceed the ``topic`` option's topic's
   ``max.message.bytes`` (equal is fine). The dead-letter topic's may be smaller: its
   ``max.message.bytes`` goes to the tasks in the result (:class:`PreflightResult`), and they
   size dead letters by it (:mod:`.dead_letters`).

Each failure is one :class:`PreflightError` naming the option at fault. ``preflight=false`` skips it all, for
clusters that forbid describing topics. With a ``topic`` column instead of the option the
``topic`` check does not run: those topics are known only to the tasks.

The decisions are pure functions over what the cluster described (:func:`plan_topics`,
:func:`missing_problem`, :func:`size_problem`, :func:`decide`); :func:`preflight` adds the I/O,
through seams (``describe``, ``create``, ``clock``, ``sleep``) that tests replace.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .. import admin
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (AuthenticationError, KafkaConnectionError, KafkaError, KafkaTimeoutError,
                      TopicAuthorizationFailedError)
from .options import DLQ_REPLICATION_FACTOR, DLQ_TOPIC, PREFLIGHT, TOPIC, SinkConfig

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
"""The preflight's bound (also bounded by ``max.block.ms``): connecting, authenticating and each
request."""
MISSING_WAIT_MS = 3_000
"""How long a missing topic is asked for again before it is reported (also bounded by
``max.block.ms``)."""
MISSING_BACKOFF_MS = (100, 200, 400, 800)
"""The waits between those questions (the last one repeats)."""
MAX_MESSAGE_BYTES = "max.message.bytes"


class PreflightError(KafkaError):
    """The driver's preflight found the cluster or a topic unusable; the message names the option."""


@dataclass(frozen=True)
class PreflightResult:
    """What the preflight learnt that the tasks need: the dead-letter topic's
    ``max.message.bytes`` (``None``: not known, e.g. ``preflight=false``)."""

    dlq_max_message_bytes: int | None = None

    def applied(self, config: SinkConfig) -> SinkConfig:
        """``config`` as the tasks get it: its error policy knows the dead-letter topic's limit."""
        policy = config.error_policy
        if self.dlq_max_message_bytes is None or policy.dlq_topic is None:
            return config
        return dataclasses.replace(config, error_policy=dataclasses.replace(
            policy, dlq_max_message_bytes=self.dlq_max_message_bytes))


@dataclass(frozen=True)
class TopicPlan:
    """The topics to check, by name -> the option that names them, and how each is asked for:
    ``auto_create`` lets the broker create it on demand (as the producer's Metadata request
    does); ``create`` is the dead-letter topic the sink creates itself, with ``factor``."""

    named: Mapping[str, str]
    auto_create: tuple[str, ...]
    plain: tuple[str, ...]
    create: str | None = None
    factor: int | None = None


def plan_topics(config: SinkConfig) -> TopicPlan:
    """Which topics to check and how to ask for each (see the module docstring, step 2)."""
    named: dict[str, str] = {}
    if config.topic is not None:
        named[config.topic] = TOPIC
    policy = config.error_policy
    dlq, factor = policy.dlq_topic, policy.dlq_replication_factor
    if dlq is not None:
        named.setdefault(dlq, DLQ_TOPIC)
    create = dlq if dlq is not None and factor is not None and named[dlq] == DLQ_TOPIC else None
    return TopicPlan(named, tuple(name for name in named if name != create),
                     () if create is None else (create,), create, factor if create else None)


def missing_problem(name: str, option: str, bootstrap: str) -> str:
    """The error for topic ``name`` (named by ``option``) still missing after the retries."""
    hint = (f" or set {DLQ_REPLICATION_FACTOR} to let the sink create it"
            if option == DLQ_TOPIC else "")
    return (f"option {option!r}: topic {name!r} does not exist on the cluster at "
            f"kafka.bootstrap.servers={bootstrap!r}, and the broker does not create topics on "
            f"demand: create it first{hint}")


def size_problem(name: str, option: str, description: admin.TopicDescription,
                 max_request_size: int) -> str | None:
    """Why ``max_request_size`` does not suit topic ``name``, or ``None``: it may not exceed the
    topic's ``max.message.bytes`` (equal is fine: the broker takes a batch of exactly that)."""
    if description.config_error is not None:
        return (f"option {option!r}: cannot read the configuration of topic {name!r}: "
                f"{description.config_error}")
    limit = _limit(description)
    if limit is None or max_request_size <= limit:
        return None
    return (f"kafka.max.request.size={max_request_size} exceeds the max.message.bytes={limit} of "
            f"topic {name!r} (option {option!r}): the broker would refuse a batch or record between "
            f"the two. Set kafka.max.request.size to at most {limit}, or raise the topic's "
            f"max.message.bytes")


def decide(named: Mapping[str, str], found: Mapping[str, admin.TopicDescription],
           max_request_size: int, bootstrap: str, skip: str = "") -> PreflightResult:
    """The verdict on the described topics: :class:`PreflightError` for the first missing topic
    or limit that does not suit (the dead-letter topic's configuration must be readable, its
    limit may be below ``max_request_size``), else what the tasks need. ``skip``: how to skip the check, added
    to the errors."""
    for name, option in named.items():
        described = found.get(name)
        if described is None or not described.exists:
            raise PreflightError(missing_problem(name, option, bootstrap))
    for name, option in named.items():
        if option == DLQ_TOPIC:        # its limit goes to the tasks, which size dead letters by it
            problem = size_problem(name, option, found[name], 0)
        else:
            problem = size_problem(name, option, found[name], max_request_size)
        if problem is not None:
            raise PreflightError(problem + skip)
    dlq = next((name for name, option in named.items() if option == DLQ_TOPIC), None)
    return PreflightResult(None if dlq is None else _limit(found[dlq]))


def _limit(description: admin.TopicDescription) -> int | None:
    value = description.configs.get(MAX_MESSAGE_BYTES)
    return None if value is None else int(value)


Describe = Callable[..., Mapping[str, admin.TopicDescription]]


def preflight(config: SinkConfig, *, describe: Describe = admin.describe_topics,
              create: Callable[..., Any] = admin.create_topic, clock: Clock = SYSTEM_CLOCK,
              sleep: Callable[[float], None] = time.sleep) -> PreflightResult:
    """Run the checks of the module docstring for ``config``; raise :class:`PreflightError`.
    ``describe`` and ``create`` stand for :func:`admin.describe_topics` and
    :func:`admin.create_topic`; ``clock`` and ``sleep`` time the retries of a missing topic."""
    if not config.preflight:
        return PreflightResult()
    producer = config.producer_config
    bootstrap = ",".join(f"{hp.host}:{hp.port}" for hp in producer.bootstrap_servers)
    timeout_s = min(TIMEOUT_S, max(1.0, producer.max_block_ms / 1000))
    plan = plan_topics(config)
    skip = f"; set {PREFLIGHT}=false to skip this check"

    def ask(names: tuple[str, ...], auto_create: bool) -> dict[str, admin.TopicDescription]:
        if not names:
            return {}
        return dict(describe(bootstrap, list(names), config_names=[MAX_MESSAGE_BYTES],
                             timeout_s=timeout_s, auto_create=auto_create, config=producer))

    try:
        found = {**ask(plan.auto_create, True), **ask(plan.plain, False)}
        if plan.create is not None and not _exists(found, plan.create):
            create(bootstrap, plan.create, 1, replication_factor=plan.factor, exist_ok=True,
                   timeout_s=timeout_s, config=producer)
            log.info("KafkaSink: created the dead-letter topic %r (replication factor %d)",
                     plan.create, plan.factor)
            found.update(ask(plan.plain, False))
        deadline = clock.monotonic_ms() + min(MISSING_WAIT_MS, producer.max_block_ms)
        for wait_ms in _backoffs():
            missing = [name for name in plan.named if not _exists(found, name)]
            if not missing or clock.monotonic_ms() + wait_ms > deadline:
                break
            log.info("KafkaSink preflight: %s not found yet; asking again in %d ms", missing, wait_ms)
            sleep(wait_ms / 1000)
            found.update(ask(tuple(n for n in plan.auto_create if n in missing), True))
            found.update(ask(tuple(n for n in plan.plain if n in missing), False))
    except AuthenticationError as error:
        raise PreflightError(
            f"preflight: the cluster at kafka.bootstrap.servers={bootstrap!r} refused the client: "
            f"{type(error).__name__}: {error} (check kafka.security.protocol, kafka.sasl.* and "
            f"kafka.ssl.*){skip}") from None
    except (KafkaConnectionError, KafkaTimeoutError, OSError) as error:
        raise PreflightError(
            f"preflight: cannot reach the cluster at kafka.bootstrap.servers={bootstrap!r} within "
            f"{timeout_s:.0f} s: {type(error).__name__}: {error}{skip}") from None
    except TopicAuthorizationFailedError as error:
        raise PreflightError(f"preflight: not allowed to describe {_list(plan.named)}: {error}{skip}") from None
    return decide(plan.named, found, producer.max_request_size, bootstrap, skip)


def _exists(found: Mapping[str, admin.TopicDescription], name: str) -> bool:
    described = found.get(name)
    return described is not None and described.exists


def _backoffs():
    yield from MISSING_BACKOFF_MS
    while True:
        yield MISSING_BACKOFF_MS[-1]


def _list(named: Mapping[str, str]) -> str:
    if not named:
        return "the cluster"
    return ", ".join(f"topic {name!r} (option {option!r})" for name, option in named.items())
