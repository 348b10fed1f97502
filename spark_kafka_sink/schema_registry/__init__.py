"""A Confluent Schema Registry client for the sink's driver: settings, subjects, calls, resolver.

    from spark_kafka_sink.schema_registry import RegistryConfig, resolve_registry_schemas

    config = RegistryConfig({"schema.registry.url": "https://sr:8081",
                             "schema.registry.basic.auth.user.info": "user:password"})
    ids = resolve_registry_schemas(config, ["orders"], is_key=False, schema=schema_json)
    ids["orders"].schema_id

Standard library HTTP only. Beside ``client/`` in the layers: it uses ``client.auth.oauth`` (the
bearer token provider), ``client.urls``, ``errors`` and ``clock``, and nothing of ``producer/``,
``spark/``, ``embedded/`` or ``testing/``. The modules, from the bottom up: :mod:`.subjects`
(subject name strategies), :mod:`.errors`, :mod:`.config` (:class:`RegistryConfig`),
:mod:`.transport` (HTTP, URLs in turn, credentials, TLS), :mod:`.client`
(:class:`RegistryClient`), :mod:`.resolve` (:func:`resolve_registry_schemas`).
"""

from __future__ import annotations

from .client import RegisteredSchema, RegistryClient
from .config import RegistryConfig
from .errors import (IncompatibleSchemaError, RegistryAuthError, RegistryError,
                     RegistryInvalidSchemaError, RegistrySchemaNotFoundError, RegistryTlsError,
                     RegistryUnreachableError, SubjectNotFoundError, SubjectVersionNotFoundError)
from .resolve import TopicSchema, resolve_registry_schemas
from .subjects import SubjectNameStrategy, record_name

__all__ = ["RegistryConfig", "RegistryClient", "RegisteredSchema", "TopicSchema",
           "resolve_registry_schemas", "SubjectNameStrategy", "record_name", "RegistryError",
           "IncompatibleSchemaError", "SubjectNotFoundError", "SubjectVersionNotFoundError",
           "RegistrySchemaNotFoundError", "RegistryInvalidSchemaError", "RegistryAuthError",
           "RegistryUnreachableError", "RegistryTlsError"]
