"""Moved to :mod:`spark_kafka_sink.client.auth.msk_iam`; this name stays for configurations that name
it (``sasl.oauthbearer.token.provider=spark_kafka_sink.client.msk_iam:msk_iam_token``)."""

from .auth.msk_iam import msk_iam_token

__all__ = ["msk_iam_token"]
