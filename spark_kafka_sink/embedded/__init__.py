"""A real Apache Kafka broker (KRaft mode) run from its jars: the default for tests and the demo.

``EmbeddedKafka(nodes=1)`` is a context manager giving ``bootstrap_servers``; ``nodes=3`` gives a
static-voter cluster with replication factor 3 for fault tests. ``security=BrokerSecurity()`` adds
SSL and SASL listeners; ``advertised_ports`` puts fault proxies in front of the nodes.
``resolve_kafka_jars`` fetches the jars from Maven Central once (Maven, or the Ivy jar pyspark
ships) into a cache directory; ``resolve_apicurio`` fetches Apicurio Registry (the testing kit's
schema registry) into the same cache.
See docs/embedded-broker.md.

Names are imported lazily (PEP 562), so ``python -m spark_kafka_sink.embedded.jars`` (``make
jars``) runs its module without a half-imported copy of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "DEFAULT_KAFKA_VERSION": "jars",
    "KafkaJars": "jars",
    "resolve_kafka_jars": "jars",
    "DEFAULT_APICURIO_VERSION": "apicurio",
    "ApicurioApp": "apicurio",
    "resolve_apicurio": "apicurio",
    "find_registry_java": "apicurio",
    "EmbeddedKafka": "embedded_kafka",
    "BrokerSecurity": "security",
    "TlsMaterial": "security",
    "KafkaNode": "node",
    "BrokerLaunchError": "errors",
    "BrokerStartError": "errors",
    "JarResolutionError": "errors",
    "JavaNotFoundError": "errors",
    "PortInUseError": "errors",
    "RegistryStartError": "errors",
    "StorageFormatError": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from .apicurio import DEFAULT_APICURIO_VERSION, ApicurioApp, find_registry_java, resolve_apicurio
    from .embedded_kafka import EmbeddedKafka
    from .errors import (BrokerLaunchError, BrokerStartError, JarResolutionError, JavaNotFoundError,
                         PortInUseError, RegistryStartError, StorageFormatError)
    from .jars import DEFAULT_KAFKA_VERSION, KafkaJars, resolve_kafka_jars
    from .node import KafkaNode
    from .security import BrokerSecurity, TlsMaterial
