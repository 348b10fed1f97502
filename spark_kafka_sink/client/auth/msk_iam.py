"""Amazon MSK IAM authentication as an OAUTHBEARER token provider.

MSK's IAM access control (required by MSK Serverless) takes, from non-Java clients, SASL
OAUTHBEARER with a token that AWS's ``aws-msk-iam-sasl-signer-python`` makes: a SigV4-signed URL
valid for 15 minutes, from the usual AWS credential chain. :func:`msk_iam_token` is a
``sasl.oauthbearer.token.provider``::

    security.protocol=SASL_SSL
    sasl.mechanism=OAUTHBEARER
    sasl.oauthbearer.token.provider=spark_kafka_sink.client.auth.msk_iam:msk_iam_token
    sasl.oauthbearer.config=region=us-east-1 [profile=<name> | role_arn=<arn> [session_name=<name>]]

With neither ``profile`` nor ``role_arn`` the signer uses the default credential chain (the
environment, the instance or task role, ...). The signer is an optional extra
(``pip install 'spark-kafka-sink[msk]'``); on Databricks or EMR install it on the cluster so
every executor has it. The token refreshes like any other (at about 80% of its 15 minutes).
"""

from __future__ import annotations

from typing import Any

__all__ = ["msk_iam_token"]

_OPTIONS = ("region", "profile", "role_arn", "session_name")


def msk_iam_token(config: str | None) -> tuple[str, float]:
    """``(token, expiry in epoch seconds)`` for the MSK cluster of ``config``'s region (see the
    module docstring); ``ValueError`` naming the problem for a bad config string."""
    options = _options(config)
    signer = _signer()
    region = options["region"]
    if "profile" in options:
        token, expiry_ms = signer.generate_auth_token_from_profile(region, options["profile"])
    elif "role_arn" in options:
        extra = {"sts_session_name": options["session_name"]} if "session_name" in options else {}
        token, expiry_ms = signer.generate_auth_token_from_role_arn(region, options["role_arn"], **extra)
    else:
        token, expiry_ms = signer.generate_auth_token(region)
    return token, expiry_ms / 1000


def _options(config: str | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for part in (config or "").split():
        key, sep, value = part.partition("=")
        if not sep or key not in _OPTIONS or not value:
            raise ValueError(f"sasl.oauthbearer.config for MSK IAM takes {', '.join(o + '=...' for o in _OPTIONS)}; "
                             f"got an entry {key!r}")
        options[key] = value
    if "region" not in options:
        raise ValueError("sasl.oauthbearer.config for MSK IAM needs region=<aws region>, e.g. region=us-east-1")
    if "profile" in options and "role_arn" in options:
        raise ValueError("sasl.oauthbearer.config for MSK IAM takes profile= or role_arn=, not both")
    if "session_name" in options and "role_arn" not in options:
        raise ValueError("sasl.oauthbearer.config for MSK IAM: session_name= goes with role_arn=")
    return options


def _signer() -> Any:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider  # noqa: PLC0415 - an optional extra
    except ImportError:
        raise ImportError("MSK IAM tokens need AWS's signer: pip install 'spark-kafka-sink[msk]' "
                          "(aws-msk-iam-sasl-signer-python) on the driver and every executor") from None
    return MSKAuthTokenProvider
