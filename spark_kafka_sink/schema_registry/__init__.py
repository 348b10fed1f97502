"""A Confluent Schema Registry client for the sink's driver: settings, subjects, errors.

    from spark_kafka_sink.schema_registry import RegistryConfig

    config = RegistryConfig({"schema.registry.url": "https://sr:8081",
                             "schema.registry.basic.auth.user.info": "user:password"})

Beside ``client/`` in the layers: it uses ``client.urls``, ``errors`` and ``clock``, and nothing
of ``producer/``, ``spark/``, ``embedded/`` or ``testing/``. The modules, from the bottom up:
:mod:`.subjects` (subject name strategies), :mod:`.errors`, :mod:`.config`
(:class:`RegistryConfig`).
"""

from __future__ import annotations

from .config import RegistryConfig
from .errors import (IncompatibleSchemaError, RegistryAuthError, RegistryError,
                     RegistryInvalidSchemaError, RegistrySchemaNotFoundError, RegistryTlsError,
                     RegistryUnreachableError, SubjectNotFoundError, SubjectVersionNotFoundError)
from .subjects import SubjectNameStrategy, record_name

__all__ = ["RegistryConfig", "SubjectNameStrategy", "record_name", "RegistryError",
           "IncompatibleSchemaError", "SubjectNotFoundError", "SubjectVersionNotFoundError",
           "RegistrySchemaNotFoundError", "RegistryInvalidSchemaError", "RegistryAuthError",
           "RegistryUnreachableError", "RegistryTlsError"]
