"""The driver's preflight: check the cluster and the sink's topics once, before any task runs.

Without it a wrong password, an unreachable cluster or a missing topic shows only in the tasks,
each waiting ``max.block.ms`` (60 s by default) before failing, and a ``max.request.size`` above a
topic's ``max.message.bytes`` shows only when the first large batch is refused. :func:`preflight`
opens one connection from the driver, within :data:`TIMEOUT_S` at most, and checks

1. that the cluster answers and accepts the client's credentials (TLS, SASL);
2. that the ``topic`` option's topic and the dead-letter topic exist, or that the broker creates
   them on demand (the Metadata request allows it, as the producer's does); a dead-letter topic
   with ``errors.deadletterqueue.topic.replication.factor`` set is created if missing;
3. that ``kafka.max.request.size`` does not exceed those topics' ``max.message.bytes``.

Each failure is one :class:`PreflightError` naming the option at fault. ``preflight=false`` skips
it all, for clusters that forbid describing topics. With a ``topic`` column instead of the option
only step 1 runs: the topics are known only to the tasks.
"""

from __future__ import annotations

import logging

from .. import admin
from ..errors import (AuthenticationError, KafkaConnectionError, KafkaError, KafkaTimeoutError,
                      TopicAuthorizationFailedError)
from .options import DLQ_REPLICATION_FACTOR, DLQ_TOPIC, PREFLIGHT, TOPIC, SinkConfig

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
"""The preflight's bound (also bounded by ``max.block.ms``): connecting, authenticating and each
request."""
MAX_MESSAGE_BYTES = "max.message.bytes"


class PreflightError(KafkaError):
    """The driver's preflight found the cluster or a topic unusable; the message names the option."""


def preflight(config: SinkConfig) -> None:
    """Run the checks of the module docstring for ``config``; raise :class:`PreflightError`."""
    if not config.preflight:
        return
    producer = config.producer_config
    bootstrap = ",".join(f"{hp.host}:{hp.port}" for hp in producer.bootstrap_servers)
    timeout_s = min(TIMEOUT_S, max(1.0, producer.max_block_ms / 1000))
    named = {}
    if config.topic is not None:
        named[config.topic] = TOPIC
    dlq = config.error_policy.dlq_topic
    if dlq is not None:
        named.setdefault(dlq, DLQ_TOPIC)
    skip = f"; set {PREFLIGHT}=false to skip this check"
    try:
        found = admin.describe_topics(bootstrap, list(named), config_names=[MAX_MESSAGE_BYTES],
                                      timeout_s=timeout_s, auto_create=True, config=producer)
        missing = [name for name in named if not found[name].exists]
        factor = config.error_policy.dlq_replication_factor
        if dlq in missing and factor is not None:
            admin.create_topic(bootstrap, dlq, 1, replication_factor=factor, exist_ok=True,
                               timeout_s=timeout_s, config=producer)
            log.info("KafkaSink: created the dead-letter topic %r (replication factor %d)", dlq, factor)
            found.update(admin.describe_topics(bootstrap, [dlq], config_names=[MAX_MESSAGE_BYTES],
                                               timeout_s=timeout_s, config=producer))
            missing.remove(dlq)
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
        raise PreflightError(f"preflight: not allowed to describe {_list(named)}: {error}{skip}") from None
    for name in missing:
        hint = (f" or set {DLQ_REPLICATION_FACTOR} to let the sink create it"
                if named[name] == DLQ_TOPIC else "")
        raise PreflightError(
            f"option {named[name]!r}: topic {name!r} does not exist on the cluster at "
            f"kafka.bootstrap.servers={bootstrap!r}, and the broker does not create topics on "
            f"demand: create it first{hint}")
    for name, option in named.items():
        described = found[name]
        if described.config_error is not None:
            raise PreflightError(f"option {option!r}: cannot read the configuration of topic "
                                 f"{name!r}: {described.config_error}{skip}")
        limit = described.configs.get(MAX_MESSAGE_BYTES)
        if limit is not None and producer.max_request_size > int(limit):
            raise PreflightError(
                f"kafka.max.request.size={producer.max_request_size} exceeds the "
                f"max.message.bytes={limit} of topic {name!r} (option {option!r}): the broker would "
                f"refuse a batch or record between the two. Set kafka.max.request.size to at most "
                f"{limit}, or raise the topic's max.message.bytes{skip}")


def _list(named: dict[str, str]) -> str:
    if not named:
        return "the cluster"
    return ", ".join(f"topic {name!r} (option {option!r})" for name, option in named.items())
