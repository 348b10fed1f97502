"""The one place a producer's client is put together: :func:`build_client` makes the
:class:`Metadata`, the :class:`Selector` and the :class:`NetworkClient` from a producer
configuration, so every client that speaks for a producer reaches the cluster with the same
settings: ``KafkaProducer`` for its sender thread, and the resumable commit path
(``producer/transactions/resumable.py``: EndTxn and InitProducerId without a producer).

What it takes from the configuration: the bootstrap addresses; ``metadata.max.age.ms``,
``metadata.max.idle.ms`` and the refresh backoff (``retry.backoff.ms``,
``retry.backoff.max.ms``) for the metadata; ``connections.max.idle.ms`` and the transport
(plain, or TLS for ``SSL`` and ``SASL_SSL``) for the selector; the rest of
:class:`NetworkSettings` (timeouts, reconnect backoff, buffers, SASL) for the network client.
``config`` is a ``ProducerConfig`` or any object with its attribute names (this package sits
below ``config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..clock import Clock
from ..protocol.api_message import ApiMessage
from .metadata import Metadata
from .network_client import NetworkClient, NetworkSettings
from .selector import Selectable, Selector, transport_factory_for


@dataclass(frozen=True)
class ClientObservers:
    """Who hears what the network client sees: ``throttle(api, throttle_ms, now_ms)`` every
    response's throttle time, ``authentication(reauthentication, succeeded)`` every SASL login
    (the producer's metrics; ``None``: nobody)."""

    throttle: Callable[[ApiMessage, int, int], None] | None = None
    authentication: Callable[[bool, bool], None] | None = None


NO_OBSERVERS = ClientObservers()


@dataclass(frozen=True)
class ClientStack:
    """A producer's view of the cluster (``metadata``) and its connections (``client``), as
    :func:`build_client` made them with ``settings``. Driven by one thread; :meth:`close` closes
    every connection and the metadata."""

    metadata: Metadata
    client: NetworkClient
    settings: NetworkSettings

    def close(self) -> None:
        self.client.close()                      # closes the metadata too


def build_client(config: Any, *, clock: Clock, default_client_id: str,
                 selector: Selectable | None = None,
                 observers: ClientObservers = NO_OBSERVERS) -> ClientStack:
    """The metadata, selector and network client of a producer with ``config`` (see the module
    docstring). ``default_client_id``: the id requests carry when ``client.id`` is not set;
    ``selector``: a test's stand-in for the sockets (the configuration's idle timeout and
    transport are then its business)."""
    settings = NetworkSettings.from_config(config, client_id=config.client_id or default_client_id)
    if selector is None:
        selector = Selector(clock=clock, connections_max_idle_ms=settings.connections_max_idle_ms,
                            transport_factory=transport_factory_for(config))
    metadata = Metadata(
        [(hp.host, hp.port) for hp in config.bootstrap_servers],
        metadata_max_age_ms=config.metadata_max_age_ms,
        metadata_max_idle_ms=config.metadata_max_idle_ms,
        retry_backoff_ms=config.retry_backoff_ms, retry_backoff_max_ms=config.retry_backoff_max_ms)
    client = NetworkClient(selector=selector, metadata=metadata, clock=clock, settings=settings,
                           throttle_observer=observers.throttle,
                           auth_observer=observers.authentication)
    return ClientStack(metadata, client, settings)
