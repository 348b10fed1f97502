"""Test tooling for users: a real Kafka cluster with nodes to kill, and a TCP fault proxy.

    from spark_kafka_sink.testing import FaultProxy, KafkaCluster

:class:`KafkaCluster` runs Apache Kafka (KRaft) from its jars (``spark_kafka_sink.embedded``; Java
17+ needed) and can kill, stop and restart nodes, create topics and report leaders and ISRs.
With ``proxied=True`` each node sits behind a :class:`FaultProxy` whose ``stall``, ``delay``,
``cut`` and ``refuse`` controls act on client connections only. :class:`TokenEndpoint` is an
OAuth token endpoint on loopback for OAUTHBEARER/OIDC clients. :class:`SchemaRegistry` runs a
real Confluent-compatible schema registry (Apicurio Registry; Java 21+ needed);
:class:`RegistryFront` puts basic auth, bearer tokens and HTTPS (a private CA, client
certificates) in front of one, checking what clients send. See docs/testing-kit.md
for a pytest example.
"""

from __future__ import annotations

from .kafka_cluster import KafkaCluster
from .faultproxy import DOWNSTREAM, UPSTREAM, FaultProxy, advertise_through
from .registry_front import RegistryFront
from .schema_registry import SchemaRegistry
from .token_endpoint import TokenEndpoint

__all__ = ["DOWNSTREAM", "UPSTREAM", "FaultProxy", "KafkaCluster", "RegistryFront", "SchemaRegistry",
           "TokenEndpoint", "advertise_through"]
